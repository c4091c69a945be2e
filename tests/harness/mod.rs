//! A test harness for GPU test binaries (`harness = false`): tests that need a GPU are
//! reported as *ignored* — never as passed — when none is usable, with the reason.

use libtest_mimic::{Arguments, Trial};

/// A test of a GPU test binary.
pub struct GpuTest {
    /// Its name.
    pub name: &'static str,
    /// What it needs to run.
    pub needs: Needs,
    /// The test; it fails by panicking.
    pub run: fn(),
}

/// What a test needs; without it the test is reported as ignored.
#[allow(dead_code)]
pub enum Needs {
    /// A usable GPU (driver, NVRTC and a device).
    Gpu,
    /// NVRTC only (kernels compile without a device). With `K2RPQ_REQUIRE_NVRTC=1` the
    /// test runs (and fails) even without it, so CI cannot skip kernel compilation.
    Nvrtc,
    /// Nothing: runs everywhere.
    Nothing,
}

/// Runs `tests` like libtest (same flags and output) and exits.
pub fn run(tests: &[GpuTest]) -> ! {
    let args = Arguments::from_args();
    let gpu = k2rpq::engine::gpu::available(0);
    if let Err(reason) = &gpu {
        println!("GPU tests SKIPPED (reported as ignored): no GPU: {reason}");
    }
    let nvrtc = k2rpq::engine::gpu::nvrtc_present();
    let nvrtc_required = std::env::var("K2RPQ_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    let trials = tests
        .iter()
        .map(|t| {
            let f = t.run;
            Trial::test(t.name, move || {
                std::panic::catch_unwind(f).map_err(|e| {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panicked".into());
                    msg.into()
                })
            })
            .with_ignored_flag(match t.needs {
                Needs::Gpu => gpu.is_err(),
                Needs::Nvrtc => !nvrtc && !nvrtc_required,
                Needs::Nothing => false,
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// Watches the device's own free-memory reading and asserts that what a test allocated
/// since [`DeviceMemoryWatch::new`] stays within a budget (plus slack for the driver's
/// allocation granularity).
#[allow(dead_code)]
pub struct DeviceMemoryWatch {
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    free_before: u64,
    budget: u64,
    slack: u64,
    /// The most bytes seen in use so far.
    pub max_in_use: u64,
}

#[allow(dead_code)]
impl DeviceMemoryWatch {
    /// Starts watching after synchronising `stream`.
    pub fn new(
        ctx: std::sync::Arc<cudarc::driver::CudaContext>,
        stream: std::sync::Arc<cudarc::driver::CudaStream>,
        budget: u64,
        slack: u64,
    ) -> Self {
        stream.synchronize().unwrap();
        let (free_before, _) = ctx.mem_get_info().unwrap();
        DeviceMemoryWatch {
            ctx,
            stream,
            free_before: free_before as u64,
            budget,
            slack,
            max_in_use: 0,
        }
    }

    /// Asserts the device shows at most `budget + slack` bytes in use since the start, and
    /// that the cache's own count (`cache_used`) is within the budget.
    pub fn check(&mut self, what: &str, cache_used: u64) {
        self.stream.synchronize().unwrap();
        let (free_now, _) = self.ctx.mem_get_info().unwrap();
        let in_use = self.free_before.saturating_sub(free_now as u64);
        self.max_in_use = self.max_in_use.max(in_use);
        let (budget, slack) = (self.budget, self.slack);
        assert!(
            in_use <= budget + slack,
            "after {what}: the device shows {in_use} bytes in use, budget {budget} (+{slack} slack); the cache counts {cache_used}"
        );
        assert!(cache_used <= budget);
    }

    /// Ends a budget test: checks that dropping the cache gave every byte back, prints
    /// what the device saw, and asserts the workload both evicted (so the budget was
    /// exercised) and peaked within the budget.
    pub fn finish<E, K>(mut self, cache: k2rpq::cache::DeviceCache<E, K>, data: u64)
    where
        E: k2rpq::engine::Engine,
        K: std::hash::Hash + Eq + Clone + Send + Sync,
    {
        let stats = cache.stats();
        drop(cache);
        self.check("dropping the cache", 0);
        println!("{stats}");
        println!(
            "device: at most {} bytes in use for a budget of {} (data {data} bytes)",
            self.max_in_use, self.budget
        );
        assert!(stats.evictions > 0);
        assert!(stats.peak_bytes <= self.budget);
    }
}
