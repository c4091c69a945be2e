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
