//! The benchmark baselines (cuSPARSE CSR and Boolean CSR) against the CPU engine, right,
//! left and batched, and the whole `bench-spmv` driver on the GPU. The kernels of
//! `cuda/bcsr.cu` are compiled by NVRTC whenever libnvrtc is present (no GPU needed; with
//! `K2RPQ_REQUIRE_NVRTC=1` always); the products run only where a GPU is found and are
//! reported as ignored elsewhere, after a `SKIPPED (no GPU: ...)` line (see
//! `tests/harness`).

use std::sync::Arc;

use k2rpq::engine::cpu::CpuEngine;
use k2rpq::engine::{Direction, Engine, MatrixConfig, PlusTimes};
use k2rpq::k2tree::K2Tree;
use k2rpq_bench::baseline::bcsr::{self, BcsrKernel, BcsrMatrix};
use k2rpq_bench::baseline::cusparse::{self, CusparseAlg, CusparseMatrix};
use k2rpq_bench::baseline::{gpu_unavailable_reason, Csr, DeviceProduct};

fn bcsr_kernels_compile_with_nvrtc() {
    if let Some(why) = bcsr::nvrtc_unavailable_reason() {
        panic!("cuda/bcsr.cu cannot be compiled: {why}");
    }
    let ptx = bcsr::compile_ptx().expect("cuda/bcsr.cu compiles");
    let text = ptx.to_src();
    for name in bcsr::kernel_names() {
        assert!(text.contains(&name), "kernel {name} missing from the PTX");
    }
}

/// A small random-looking matrix, not square and not a power of two, with a dense row
/// and a dense column (so warp-per-row and atomics see long rows).
fn matrix() -> (Arc<K2Tree>, Csr) {
    let (rows, cols) = (1000u64, 777u64);
    let mut edges: Vec<(u32, u32)> = (0..20_000u64)
        .map(|i| {
            let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (
                (h >> 20) as u32 % rows as u32,
                (h >> 45) as u32 % cols as u32,
            )
        })
        .collect();
    edges.extend((0..cols as u32).map(|c| (3, c)));
    edges.extend((0..rows as u32).map(|r| (r, 5)));
    let tree = Arc::new(K2Tree::from_edges(rows, cols, edges.clone()));
    (tree, Csr::from_edges(rows, cols, &edges).unwrap())
}

fn input(len: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7919) % 5) as f32).collect()
}

fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-6 * g.abs().max(w.abs());
        assert!((g - w).abs() <= tol, "{what}: entry {i}: {g} vs {w}");
    }
}

fn check_all(mut make: impl FnMut(Direction, usize) -> Option<Box<dyn DeviceProduct>>) {
    let (tree, _) = matrix();
    let cpu = CpuEngine::new();
    let m = cpu.load(&tree, MatrixConfig::CachedFrontier).unwrap();
    for dir in [Direction::Right, Direction::Left] {
        for batch in [1usize, 4, 16, 64] {
            let Some(mut p) = make(dir, batch) else {
                continue;
            };
            let (n_in, n_out) = dir.lengths(tree.rows(), tree.cols());
            let x = input(n_in as usize * batch);
            let mut want = vec![0.0f32; n_out as usize * batch];
            cpu.product::<PlusTimes>(&m, dir, &x, batch, &mut want)
                .unwrap();
            p.set_input(&x).unwrap();
            p.run().unwrap();
            assert_close(
                &format!("{dir:?} batch {batch}"),
                &p.output().unwrap(),
                &want,
            );
            assert!(p.working_set_bytes() >= p.matrix_bytes());
        }
    }
}

fn cusparse_matches_cpu_engine() {
    // The harness runs this only with a usable GPU; cuSPARSE must then be there too.
    if let Some(why) = cusparse::unavailable_reason() {
        panic!("GPU present but cuSPARSE unusable: {why}");
    }
    let (_, csr) = matrix();
    let a = CusparseMatrix::new(&csr).unwrap();
    assert_eq!(a.bytes(), csr.cusparse_bytes());
    for alg in CusparseAlg::SPMM {
        check_all(|dir, batch| {
            let alg = if batch == 1 { CusparseAlg::SpMv } else { alg };
            match a.prepare(dir, batch, alg) {
                Ok(p) => Some(Box::new(p)),
                // Not every SpMM algorithm supports the transposed matrix (cuSPARSE
                // answers "not supported" or "invalid value"); the right product must run.
                Err(e) if dir == Direction::Left && batch > 1 => {
                    println!("{} {dir:?} batch {batch}: {e}", alg.name());
                    None
                }
                Err(e) => panic!("{} {dir:?} batch {batch}: {e}", alg.name()),
            }
        });
    }
}

fn bcsr_matches_cpu_engine() {
    if let Some(why) = gpu_unavailable_reason().or_else(bcsr::nvrtc_unavailable_reason) {
        panic!("GPU test run without a usable GPU: {why}");
    }
    let (_, csr) = matrix();
    let a = BcsrMatrix::new(&csr).unwrap();
    assert_eq!(a.bytes(), csr.bcsr_bytes());
    for kernel in [BcsrKernel::ThreadPerRow, BcsrKernel::WarpPerRow] {
        check_all(|dir, batch| Some(Box::new(a.prepare(dir, batch, kernel).unwrap())));
    }
}

/// The whole benchmark on a small graph: every GPU contender agrees with the reference
/// (none is rejected) and is measured, with ratios to cuSPARSE.
fn bench_spmv_measures_every_gpu_contender() {
    use k2rpq_bench::spmv::{graph::LoadedGraph, prepare, run, SpmvOptions};
    if let Some(why) = cusparse::unavailable_reason().or_else(bcsr::nvrtc_unavailable_reason) {
        panic!("GPU present but cuSPARSE or NVRTC unusable: {why}");
    }
    let edges: Vec<(u32, u32)> = (0..5000u32)
        .flat_map(|i| (0..6).map(move |d| (i, (i * 3 + d * 11) % 5000)))
        .collect();
    let opts = SpmvOptions {
        repeats: 3,
        warmup: 1,
        batches: vec![1, 4],
        bit_batches: vec![64],
        ..Default::default()
    };
    let p = prepare(LoadedGraph::from_edges("g", 5000, 5000, &edges), &opts).unwrap();
    let r = run(&p, &opts).unwrap();
    print!("{}", r.table());
    assert!(
        r.skipped.iter().all(|s| !s.reason.starts_with("REJECTED")),
        "{:?}",
        r.skipped
    );
    for who in [
        "cusparse",
        "bcsr",
        "gpu k2 dir",
        "gpu k2 scan",
        "gpu k2+F dir",
        "gpu k2+F scan",
        "gpu k2 dir rows",
        "gpu k2+F dir rows",
        "gpu k2+F scan rows",
        "gpu k2 dir wrank",
        "gpu k2+F dir wrank",
        "gpu k2+F scan wrank",
        "gpu k2 dir wagg",
        "gpu k2+F dir wagg",
        "gpu k2+F scan wagg",
        "gpu k2 dir window",
        "gpu k2+F dir window",
        "gpu k2+F scan window",
        "gpu k2 dir M20",
        "gpu k2+F dir M20",
        "gpu k2+F blocks",
        "gpu k2+F rowblk",
        "gpu k2+F rowwin",
        "gpu k2+F blocks rows",
        "gpu k2+F rowwin rows",
        "gpu k2+F blocks wagg",
        "gpu k2+F rowwin wagg",
        "gpu k2+F blocks runs",
        "gpu k2+F rowwin runs",
    ] {
        for dir in [Direction::Right, Direction::Left] {
            for batch in [1, 4] {
                if who == "cusparse" && dir == Direction::Left && batch > 1 {
                    continue; // transposed SpMM may be unsupported by every algorithm
                }
                assert!(
                    r.measurements
                        .iter()
                        .any(|m| m.contender == who && m.direction == dir && m.batch == batch),
                    "{who} {dir:?} B={batch} not measured: {:?}",
                    r.skipped
                );
            }
        }
    }
    assert!(r
        .measurements
        .iter()
        .any(|m| m.bit_packed && m.contender.starts_with("gpu") && m.time_vs_cusparse.is_some()));
}

/// The hold of the stream before a timed region (`engine::gpu::hold_stream`): its kernel loads
/// from PTX, keeps the stream busy for at least what it is asked (so work queued behind
/// it waits), and `Device::time` works with and without it.
fn timing_hold_keeps_the_stream_busy() {
    use cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
    use k2rpq::engine::gpu::{hold_stream, set_timing_hold_ns, timing_hold_ns};
    use k2rpq_bench::baseline::Device;
    let dev = Device::open().expect("device");
    let (e0, e1) = (
        dev.ctx.new_event(Some(CU_EVENT_DEFAULT)).unwrap(),
        dev.ctx.new_event(Some(CU_EVENT_DEFAULT)).unwrap(),
    );
    e0.record(&dev.stream).unwrap();
    hold_stream(&dev.stream, 2_000_000).expect("hold kernel");
    e1.record(&dev.stream).unwrap();
    e1.synchronize().unwrap();
    let ms = e0.elapsed_ms(&e1).unwrap();
    assert!(ms >= 1.9, "a 2 ms hold took {ms} ms");
    hold_stream(&dev.stream, 0).expect("no hold");
    let before = timing_hold_ns();
    for ns in [0, before] {
        set_timing_hold_ns(ns);
        let t = dev.time(1, 3, || Ok(())).expect("timing");
        assert!(t.median_ms.is_finite() && t.median_ms >= 0.0, "{t:?}");
    }
    set_timing_hold_ns(before);
}

#[path = "../../tests/harness/mod.rs"]
mod harness;

fn main() {
    use harness::{GpuTest, Needs};
    harness::run(&[
        GpuTest {
            name: "bcsr_kernels_compile_with_nvrtc",
            needs: Needs::Nvrtc,
            run: bcsr_kernels_compile_with_nvrtc,
        },
        GpuTest {
            name: "cusparse_matches_cpu_engine",
            needs: Needs::Gpu,
            run: cusparse_matches_cpu_engine,
        },
        GpuTest {
            name: "bcsr_matches_cpu_engine",
            needs: Needs::Gpu,
            run: bcsr_matches_cpu_engine,
        },
        GpuTest {
            name: "bench_spmv_measures_every_gpu_contender",
            needs: Needs::Gpu,
            run: bench_spmv_measures_every_gpu_contender,
        },
        GpuTest {
            name: "timing_hold_keeps_the_stream_busy",
            needs: Needs::Gpu,
            run: timing_hold_keeps_the_stream_busy,
        },
    ])
}
