//! Holding a stream before a timed region, so that events time the device's work and not
//! the host's submission of it.
//!
//! A timed repeat records a start event, submits the work and records an end event. On an
//! idle stream the device reaches the start event at once and then waits for the host to
//! submit the work, and the events count that wait: little for one replayed CUDA graph
//! (cnr-2000's bit-packed product: 14.5 µs from an idle stream, 13.8 µs held), much for a
//! library call that submits several kernels (cuSPARSE's SpMV there: 22.3 against
//! 17.5 µs). [`hold_stream`] first enqueues one thread that spins on the device's global
//! timer, so the start event, the work and the end event are all queued before the device
//! reaches them, as NVBench does with its blocking kernel. A submission slower than the
//! hold is still counted, so a hold can only leave host time in a measurement, never hide
//! device time.
//!
//! The kernel is PTX text loaded by the driver (no NVRTC), once per context.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use super::context::cuda_err;
use crate::engine::Result;

/// How long a timed repeat holds its stream by default: far longer than the host takes
/// to submit an event, a graph launch or a cuSPARSE call and another event.
const DEFAULT_HOLD_NS: u64 = 200_000;

/// The hold of every timed repeat in this process ([`timing_hold_ns`]).
static TIMING_HOLD_NS: AtomicU64 = AtomicU64::new(DEFAULT_HOLD_NS);

/// How long timers hold their stream before a timed region
/// ([`GpuEngine::time_ms`](super::GpuEngine::time_ms), and the benchmarks' own), in
/// nanoseconds: 200 µs unless set ([`set_timing_hold_ns`]); 0: no hold, so the events
/// count the host's submission too.
pub fn timing_hold_ns() -> u64 {
    TIMING_HOLD_NS.load(Ordering::Relaxed)
}

/// Sets [`timing_hold_ns`] for the whole process (`k2rpq-bench spmv --hold-us`).
pub fn set_timing_hold_ns(ns: u64) {
    TIMING_HOLD_NS.store(ns, Ordering::Relaxed);
}

/// `k2rpq_hold(ns)`: one thread spins until `ns` nanoseconds of `%globaltimer` passed.
const HOLD_PTX: &str = r"
.version 7.0
.target sm_75
.address_size 64

.visible .entry k2rpq_hold(.param .u64 k2rpq_hold_ns)
{
    .reg .pred %p;
    .reg .b64 %ns, %t0, %t, %dt;
    ld.param.u64 %ns, [k2rpq_hold_ns];
    mov.u64 %t0, %globaltimer;
$spin:
    mov.u64 %t, %globaltimer;
    sub.u64 %dt, %t, %t0;
    setp.lt.u64 %p, %dt, %ns;
    @%p bra $spin;
    ret;
}
";

/// The loaded hold kernel of each context it was asked for (by context handle).
static KERNELS: Mutex<Vec<(usize, CudaFunction)>> = Mutex::new(Vec::new());

/// The hold kernel of `stream`'s context, loaded on first use.
fn kernel(stream: &Arc<CudaStream>) -> Result<CudaFunction> {
    let ctx = stream.context();
    let key = ctx.cu_ctx() as usize;
    let mut kernels = KERNELS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, f)) = kernels.iter().find(|(k, _)| *k == key) {
        return Ok(f.clone());
    }
    let module = ctx
        .load_module(Ptx::from_src(HOLD_PTX))
        .map_err(cuda_err("hold kernel"))?;
    let f = module
        .load_function("k2rpq_hold")
        .map_err(cuda_err("hold kernel"))?;
    kernels.push((key, f.clone()));
    Ok(f)
}

/// Enqueues on `stream` one thread that keeps it busy for `ns` nanoseconds (nothing when
/// `ns` is 0). Work enqueued after it waits behind it. Where the driver cannot load the
/// kernel (a device older than compute capability 7.5), nothing is held: a one-line notice
/// says so once, and timings then count the host's submission as with `ns` = 0.
pub fn hold_stream(stream: &Arc<CudaStream>, ns: u64) -> Result<()> {
    static NOTICE: std::sync::Once = std::sync::Once::new();
    if ns == 0 {
        return Ok(());
    }
    let f = match kernel(stream) {
        Ok(f) => f,
        Err(e) => {
            NOTICE.call_once(|| eprintln!("k2rpq: GPU timings without a stream hold ({e})"));
            return Ok(());
        }
    };
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the kernel takes one u64 and touches no memory.
    unsafe { stream.launch_builder(&f).arg(&ns).launch(one) }
        .map(|_| ())
        .map_err(cuda_err("hold kernel"))
}
