//! An experiment of issue 10 (docs/BENCHMARKS.md, session 31): the bit-packed right
//! product (a batch of 64 sources, one u64 word per node) over *row groups*, against the
//! engine's product over row windows (`rowwin`) in the same process.
//!
//! Session 20's `ncu` found the engine's `rowwindows_bits` bound by each warp's chain of
//! ~860 instructions per window of 128 entries (issue slots 41 % busy, 19 of 32 lanes
//! active): a window's runs cross lanes, so the kernel hands each lane's leading sums to
//! the run's owner through shared memory, and the owners loop. Row groups remove all of
//! that. The block rows are binned by length: a row of `len` entries gets a group of `g`
//! lanes, the smallest power of two with `ceil(len / g) ≤ iters`, and a warp takes 32 / g
//! rows of one bin, sorted by length, so that its lanes run the same number of iterations
//! (at most `iters`). Lane k of a group reads entries k, k + g, … of its row, laid out so
//! that each iteration of the warp is one coalesced load of 32 slots (`slot j * 32 +
//! lane`, an ELL layout per warp, padding where a row is shorter than the warp's longest).
//! The group's lanes combine their words by shuffles and the first stores the row: no
//! clear of `y`, no atomics, every word written once. Rows longer than `32 · iters`
//! entries are cut into pieces of a warp each: cleared first, then updated with atomics.
//!
//! Prediction (before its run; cnr-2000, 647 K entries, 81 K block rows of which 1,908
//! have more than 32 entries): ~1.4 M warp instructions instead of 4.7 M, every warp's
//! chain at most two rounds of loads, ~4.3 K warps (about one wave at 4 blocks of 8 warps
//! per SM): the kernel 10.3 → 5.5-7 µs, the held loop (clear included) 12.2 → 8-9.5 µs,
//! which would bring the replayed batch under 0.05x of cuSPARSE's SpMM (9.1 µs).
//!
//! Outcome (docs/BENCHMARKS.md, session 31): at first a miss. On cnr-2000 the best layout (8
//! iterations, bins sorted by length, `groups_u2`) took 0.0097 ms per product against the
//! engine's 0.0110 (−12 %; `ncu`: kernel 9.1 µs against 10.4-11.9, instructions −42 %,
//! but L2 sectors +52 %: rows binned by length no longer share their `x` lines with
//! their neighbours, which row windows keep together). Bins in row order (or sorted
//! within runs of `sigma` rows, as SELL-C-σ does) keep that locality but pad more, and
//! were slower on cnr-2000. On cnr-2000 × 64 and the 200M-edge web graph, whose `x` does
//! not stay in L2, every variant was 1.0-1.4x slower than the engine's row windows. Then
//! `ROW_GROUPS_BLOCKS=1` gave each row too long for a warp but not for a block of 8 a
//! block of its own (its warps combine in shared memory, so cnr-2000 needs no clear at
//! all): 0.0078 ms against the engine's 0.0112 replayed (0.70x). That layout (8
//! iterations, sorted, blocks, `groups_u2`) is the engine's `RowGroups`
//! (`GpuOptions::row_groups`, `rowgroups_bits`), an option beside the row windows; since
//! session 33 the engine's slots are 6 bytes (block column and bitmap in two arrays)
//! where these are the 8-byte block entries.
//!
//! Each product's `y` is checked word for word against the engine's (whose products the
//! GPU tests check against the CPU engine), from a `y` filled with garbage; before any GPU
//! work each layout is checked against the tree's cells on the host.
//!
//! ```text
//! row_groups [EDGES=200000000 | EDGE-LIST-FILE[*COPIES]] [REPS=30]
//! ROW_GROUPS_ITERS=4,8,16 ROW_GROUPS_SIGMA=max,0,64 ROW_GROUPS_KERNELS=groups_u4,groups_u2 row_groups …
//! ```

use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use k2rpq::bench::input::web_or_edge_list;
use k2rpq::engine::gpu::{
    block_entries, block_entry_parts, BitsUpdate, FrontierLayout, GpuEngine, GpuOptions,
};
use k2rpq::engine::{BitMatrix, Direction, Engine, EngineError, MatrixConfig, Traversal};

/// A group without a row (`NONE_ROW` in the kernel).
const NONE_ROW: u32 = u32::MAX;
/// A piece of a row cut over several warps (`SHARED_ROW`): cleared first, ORed into.
const SHARED_ROW: u32 = 1 << 31;
/// Descriptor flag of a warp whose block's 8 warps share one row (`BLOCK_ROW`): they
/// combine their words in shared memory and store the row once, with no clear.
const BLOCK_ROW: u32 = 1 << 8;
/// Warps per block of the kernels (`WARPS_PER_BLOCK`).
const WARPS: u32 = 8;

/// The row-group layout of a relation's block entries.
struct RowGroups {
    /// Entries (`block_entry`s; 0: padding), warp by warp, iteration-major.
    slots: Vec<u64>,
    /// Per warp: first slot, iterations, log2 of the group size, first entry of `rows`.
    desc: Vec<[u32; 4]>,
    /// Per group: its block row (`SHARED_ROW` set for a piece) or `NONE_ROW`.
    rows: Vec<u32>,
    /// The block rows cut into pieces (cleared before each product).
    shared: Vec<u32>,
}

/// One warp's rows before layout: its group size and, per group, the row and its entries;
/// `block`: one of the 8 warps of a block that share a row.
struct Warp<'a> {
    lg: u32,
    groups: Vec<(u32, &'a [u64])>,
    block: bool,
}

/// Lays out `entries` (sorted by block row) for block rows `0 .. block_rows` with at most
/// `iters` iterations per warp; a bin's rows sorted by length within each run of `sigma`
/// rows (as SELL-C-σ does): 0 keeps the row order (neighbouring rows, which read nearby
/// `x`, share warps), `usize::MAX` sorts the whole bin (the least padding). With
/// `blocks`, a row too long for one warp but not for 8 goes to a block of its own (8
/// warps, aligned to the grid's blocks, the first in the grid) instead of cleared pieces.
fn row_groups(
    entries: &[u64],
    block_rows: u32,
    iters: u32,
    sigma: usize,
    blocks: bool,
) -> RowGroups {
    let mut starts = Vec::with_capacity(block_rows as usize + 1);
    let mut at = 0;
    for row in 0..block_rows {
        starts.push(at);
        while at < entries.len() && block_entry_parts(entries[at]).0 == row {
            at += 1;
        }
    }
    starts.push(at);
    assert_eq!(at, entries.len(), "entries past the last block row");
    let cap = 32 * iters as usize;
    // Rows (and pieces) per log2 of the group size.
    let mut bins: Vec<Vec<(u32, &[u64])>> = vec![Vec::new(); 6];
    let mut shared = Vec::new();
    let mut block_warps = Vec::new();
    for row in 0..block_rows {
        let run = &entries[starts[row as usize]..starts[row as usize + 1]];
        if blocks && run.len() > cap && run.len() <= WARPS as usize * cap {
            let pieces: Vec<&[u64]> = run.chunks(run.len().div_ceil(WARPS as usize)).collect();
            for k in 0..WARPS as usize {
                block_warps.push(Warp {
                    lg: 5,
                    groups: vec![(row, pieces.get(k).copied().unwrap_or(&[]))],
                    block: true,
                });
            }
        } else if run.len() > cap {
            shared.push(row);
            bins[5].extend(run.chunks(cap).map(|piece| (row | SHARED_ROW, piece)));
        } else {
            let lg = (0..=5u32)
                .find(|&lg| run.len().div_ceil(1 << lg) <= iters as usize)
                .expect("a group of 32 lanes takes cap entries");
            bins[lg as usize].push((row, run));
        }
    }
    let mut warps = Vec::new();
    for (lg, mut bin) in bins.into_iter().enumerate() {
        if sigma > 1 {
            for scope in bin.chunks_mut(sigma) {
                scope.sort_by_key(|&(_, run)| std::cmp::Reverse(run.len()));
            }
        }
        let per_warp = 32 >> lg;
        for groups in bin.chunks(per_warp) {
            warps.push(Warp {
                lg: lg as u32,
                groups: groups.to_vec(),
                block: false,
            });
        }
    }
    // The warps with the most iterations first: the longest chains start first.
    let warp_iters = |w: &Warp| {
        let longest = w.groups.iter().map(|g| g.1.len()).max().unwrap_or(0);
        longest.div_ceil(1 << w.lg) as u32
    };
    warps.sort_by_key(|w| std::cmp::Reverse(warp_iters(w)));
    let mut out = RowGroups {
        slots: Vec::new(),
        desc: Vec::with_capacity(warps.len()),
        rows: Vec::new(),
        shared,
    };
    for w in block_warps.iter().chain(&warps) {
        let (g, it) = (1usize << w.lg, warp_iters(w));
        let first = out.slots.len();
        out.slots.resize(first + 32 * it as usize, 0);
        out.desc.push([
            u32::try_from(first).expect("slots fit 32 bits"),
            it,
            w.lg | if w.block { BLOCK_ROW } else { 0 },
            out.rows.len() as u32,
        ]);
        for (gi, &(row, run)) in w.groups.iter().enumerate() {
            for (e, &entry) in run.iter().enumerate() {
                out.slots[first + (e / g) * 32 + gi * g + e % g] = entry;
            }
            out.rows.push(row);
        }
        out.rows.resize(
            out.desc.last().unwrap()[3] as usize + (32 >> w.lg),
            NONE_ROW,
        );
    }
    out
}

/// `y = A x` from the layout, lane by lane as the kernel computes it (on the host).
fn groups_product(l: &RowGroups, x: &[u64], n: usize) -> Vec<u64> {
    let mut y = vec![0u64; n];
    let word = |y: &mut Vec<u64>, at: usize, v: u64, or: bool| {
        if let Some(w) = y.get_mut(at) {
            *w = if or { *w | v } else { v };
        }
    };
    for &[first, it, flags, base] in &l.desc {
        let (lg, block) = (flags & 0xFF, flags & BLOCK_ROW != 0);
        let mut acc = [[0u64; 4]; 32];
        for (lane, a) in acc.iter_mut().enumerate() {
            for j in 0..it as usize {
                let (_, col, bm) = block_entry_parts(l.slots[first as usize + j * 32 + lane]);
                for b in 0..16 {
                    if bm >> b & 1 != 0 {
                        a[b / 4] |= x.get(col as usize * 4 + b % 4).copied().unwrap_or(0);
                    }
                }
            }
        }
        let g = 1usize << lg;
        for gi in 0..32 / g {
            let row = l.rows[base as usize + gi];
            if row == NONE_ROW {
                continue;
            }
            // A block's warps OR into their row, zero before them (as is all of y here).
            let shared = row & SHARED_ROW != 0 || block;
            let r0 = (row & !SHARED_ROW) as usize * 4;
            for i in 0..4 {
                let v = acc[gi * g..(gi + 1) * g].iter().fold(0, |s, a| s | a[i]);
                word(&mut y, r0 + i, v, shared);
            }
        }
    }
    y
}

/// How the layout's `x` gathers coalesce: the mean number of distinct 32-byte sectors of
/// `x` (one per block column) per warp load of slots with cells, and the distinct sectors
/// per warp over its entries (what L1 can reuse within a warp; lower is better for both).
fn gather_stats(l: &RowGroups) -> String {
    let (mut loads, mut sectors, mut warp_sectors, mut cells) = (0u64, 0u64, 0u64, 0u64);
    let mut cols = Vec::with_capacity(32);
    let mut all = Vec::new();
    for &[first, it, _, _] in &l.desc {
        all.clear();
        for j in 0..it as usize {
            let at = first as usize + j * 32;
            cols.clear();
            cols.extend(
                l.slots[at..at + 32]
                    .iter()
                    .map(|&e| block_entry_parts(e))
                    .filter(|p| p.2 != 0)
                    .map(|p| p.1),
            );
            all.extend_from_slice(&cols);
            cols.sort_unstable();
            cols.dedup();
            loads += u64::from(!cols.is_empty());
            sectors += cols.len() as u64;
        }
        cells += all.len() as u64;
        all.sort_unstable();
        all.dedup();
        warp_sectors += all.len() as u64;
    }
    format!(
        "{:.2} sectors per warp load, {:.3} distinct sectors per entry in a warp",
        sectors as f64 / loads.max(1) as f64,
        warp_sectors as f64 / cells.max(1) as f64
    )
}

/// The layout on the device.
struct DeviceGroups {
    slots: CudaSlice<u64>,
    desc: CudaSlice<u32>,
    rows: CudaSlice<u32>,
    shared: CudaSlice<u32>,
    warps: u32,
    shared_count: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let source = args.get(1).map_or("200000000", String::as_str);
    let reps: usize = args.get(2).map_or(30, |s| s.parse().expect("REPS"));
    let iters: Vec<u32> = std::env::var("ROW_GROUPS_ITERS")
        .unwrap_or_else(|_| "4,8,16".into())
        .split(',')
        .map(|s| s.parse().expect("iterations"))
        .collect();
    let kernels: Vec<String> = std::env::var("ROW_GROUPS_KERNELS")
        .unwrap_or_else(|_| "groups_u4,groups_u2,groups_u4_b5,groups_u8".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    let (name, g) = web_or_edge_list(source).expect("a number of edges or an edge list");
    let (rows, cols) = (g.rows, g.cols);
    let tree = Arc::new(g.into_tree().expect("tree"));
    let n = rows.max(cols) as usize;
    println!("{name}: {} cells, {rows}x{cols}", tree.nnz());
    let entries = block_entries(&tree, FrontierLayout::RowBlocks);
    let block_rows = u32::try_from(rows.div_ceil(4)).expect("block rows");
    let words: Vec<u64> = (0..n as u64)
        .map(|i| {
            let z = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z ^ (z >> 27)
        })
        .collect();
    // ROW_GROUPS_SIGMA=max,0,512: each bin sorted by length whole, not at all, or within
    // runs of 512 rows.
    let orders: Vec<usize> = std::env::var("ROW_GROUPS_SIGMA")
        .unwrap_or_else(|_| "max,0,256,2048".into())
        .split(',')
        .map(|o| {
            if o == "max" {
                usize::MAX
            } else {
                o.parse().expect("sigma")
            }
        })
        .collect();
    // ROW_GROUPS_BLOCKS=0,1: long rows as cleared pieces, or in blocks of their own.
    let blocks: Vec<bool> = std::env::var("ROW_GROUPS_BLOCKS")
        .unwrap_or_else(|_| "0,1".into())
        .split(',')
        .map(|b| b == "1")
        .collect();
    let layouts: Vec<(String, RowGroups)> = iters
        .iter()
        .flat_map(|&it| orders.iter().map(move |&o| (it, o)))
        .flat_map(|(it, o)| blocks.iter().map(move |&b| (it, o, b)))
        .map(|(it, sigma, blocks)| {
            let tag = match sigma {
                usize::MAX => format!("iters {it} sorted"),
                0 => format!("iters {it} row order"),
                s => format!("iters {it} sigma {s}"),
            };
            let tag = if blocks { tag + " blocks" } else { tag };
            (tag, row_groups(&entries, block_rows, it, sigma, blocks))
        })
        .collect();
    for (it, l) in &layouts {
        let lgs: Vec<usize> = (0..6)
            .map(|lg| l.desc.iter().filter(|d| d[2] & 0xFF == lg).count())
            .collect();
        println!(
            "{it}: {} warps (per group size 1..32: {lgs:?}), {} slots ({:.1} % padding, {:.1} MB), {} rows cut into pieces; {}",
            l.desc.len(),
            l.slots.len(),
            100.0 * (l.slots.len() - entries.len()) as f64 / l.slots.len().max(1) as f64,
            (l.slots.len() * 8 + l.desc.len() * 16 + l.rows.len() * 4) as f64 * 1e-6,
            l.shared.len(),
            gather_stats(l)
        );
    }
    // The layouts against the tree's cells, on the host, for graphs of up to 20M cells.
    if tree.nnz() <= 20_000_000 {
        let mut want = vec![0u64; n];
        for (row, col) in tree.cells() {
            want[row as usize] |= words[col as usize];
        }
        for (it, l) in &layouts {
            assert!(groups_product(l, &words, n) == want, "{it}");
        }
        println!("host check: every layout computes y = A x exactly");
    }

    let gpu = GpuEngine::with_options(
        0,
        GpuOptions {
            frontier: FrontierLayout::RowBlocks,
            ..GpuOptions::default()
        },
    )
    .unwrap_or_else(|e| {
        eprintln!("row_groups needs a GPU: {e}");
        std::process::exit(2)
    });
    let m = gpu.load(&tree, MatrixConfig::CachedFrontier).expect("load");
    let xb = gpu
        .bits_upload(&BitMatrix::from_words(n, 1, words.clone()))
        .expect("x");
    let mut yb = gpu.bits_zeroed(n, 1).expect("y");
    let engine_ms = gpu
        .time_ms(reps, || {
            gpu.bool_product_overwrite(&m, Direction::Right, &xb, &mut yb, Traversal::Dense)
        })
        .expect("product");
    let want = gpu.bits_download(&yb).expect("y").into_words();
    let graph = gpu
        .record_bool_product(
            &m,
            Direction::Right,
            gpu.bits_upload(&BitMatrix::from_words(n, 1, words.clone()))
                .expect("x"),
            gpu.bits_zeroed(n, 1).expect("y"),
            Traversal::Dense,
            BitsUpdate::Overwrite,
        )
        .expect("graph");
    let graph_ms = gpu.time_ms(reps, || graph.launch()).expect("replay");
    println!(
        "engine ({}): {engine_ms:.4} ms per product host-called, {graph_ms:.4} ms replayed; {} entries",
        if m.has_row_windows() { "rowwin" } else { "rowblk" },
        entries.len()
    );

    let ctx = gpu.context();
    let stream = ctx.stream();
    let opts = CompileOptions {
        options: vec![
            format!("--gpu-architecture={}", ctx.arch()),
            "-std=c++17".into(),
        ],
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(include_str!("row_groups.cu"), opts).expect("NVRTC");
    let module = ctx.context().load_module(ptx).expect("module");
    let clear = module.load_function("clear_rows4").expect("clear");
    let x = stream.clone_htod(&words).expect("x");
    let garbage = vec![0xA5A5_A5A5_A5A5_A5A5u64; n];
    let mut y = stream.clone_htod(&garbage).expect("y");
    let n64 = n as u64;
    for (it, l) in &layouts {
        let nonempty = |v: &[u32]| if v.is_empty() { vec![0] } else { v.to_vec() };
        let d = DeviceGroups {
            slots: stream
                .clone_htod(if l.slots.is_empty() {
                    &[0u64][..]
                } else {
                    &l.slots
                })
                .expect("slots"),
            desc: stream
                .clone_htod(&nonempty(&l.desc.concat()))
                .expect("desc"),
            rows: stream.clone_htod(&nonempty(&l.rows)).expect("rows"),
            shared: stream.clone_htod(&nonempty(&l.shared)).expect("shared"),
            warps: l.desc.len() as u32,
            shared_count: l.shared.len() as u64,
        };
        let cfg = LaunchConfig {
            grid_dim: (d.warps.div_ceil(WARPS).max(1), 1, 1),
            block_dim: (32 * WARPS, 1, 1),
            shared_mem_bytes: 0,
        };
        let clear_cfg = LaunchConfig {
            grid_dim: ((d.shared_count * 4).div_ceil(256).max(1) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        for kernel in &kernels {
            let f = module.load_function(kernel).expect("kernel");
            let launch = |y: &mut CudaSlice<u64>| -> k2rpq::engine::Result<()> {
                // SAFETY: the arguments match the kernels' parameters (desc holds 4 u32
                // per warp, a uint4), and every buffer holds what the counts say.
                unsafe {
                    if d.shared_count > 0 {
                        stream
                            .launch_builder(&clear)
                            .arg(&d.shared)
                            .arg(&d.shared_count)
                            .arg(&mut *y)
                            .arg(&n64)
                            .launch(clear_cfg)
                            .expect("clear");
                    }
                    stream
                        .launch_builder(&f)
                        .arg(&d.slots)
                        .arg(&d.desc)
                        .arg(&d.warps)
                        .arg(&d.rows)
                        .arg(&x)
                        .arg(&n64)
                        .arg(&mut *y)
                        .arg(&n64)
                        .launch(cfg)
                        .expect("product");
                }
                Ok(())
            };
            stream.memcpy_htod(&garbage, &mut y).expect("y");
            launch(&mut y).expect("product");
            let got = stream.clone_dtoh(&y).expect("y");
            let wrong = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            let ms = gpu.time_ms(reps, || launch(&mut y)).expect("timing");
            // The same launches recorded as a CUDA graph (as the engine's replayed rows).
            stream
                .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .expect("begin capture");
            launch(&mut y).expect("product");
            let recorded = stream
                .end_capture(CUgraphInstantiate_flags(0))
                .expect("end capture")
                .expect("a graph");
            let replay = || {
                recorded
                    .launch()
                    .map_err(|e| EngineError::Cuda(format!("graph launch: {e:?}")))
            };
            let replayed_ms = gpu.time_ms(reps, replay).expect("timing");
            println!(
                "  {it} {kernel} ({} blocks): {ms:.4} ms per product host-called ({:.3}x the engine's), {replayed_ms:.4} ms replayed ({:.3}x); {}",
                cfg.grid_dim.0,
                ms / engine_ms,
                replayed_ms / graph_ms,
                if wrong == 0 {
                    "y matches the engine's".to_string()
                } else {
                    format!("{wrong} WORDS DIFFER from the engine's")
                }
            );
        }
    }
}
