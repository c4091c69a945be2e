//! An experiment of issue 10 (docs/BENCHMARKS.md, session 18): the bit-packed right product
//! (a batch of 64 sources, one u64 word per node) over windows of block entries that no
//! block row's run crosses, against the engine's product over `RowBlocks` in the same
//! process. A warp owns a window, so it writes each of its rows' words once with plain
//! stores: no clear of `y`, no atomics, no reads of `y` (a run longer than a window is the
//! exception: its rows are cleared first and take atomics). Two slot formats (see
//! `examples/header_runs.cu`):
//! - *header runs* (`Headers(4)`, `Headers(8)`): each block row's run preceded by a header
//!   slot that names the row; an entry is `bitmap << 32 | block column`, so an 8x4 entry
//!   holds up to 32 cells in 8 bytes where a `RowBlocks` entry holds 16;
//! - *row windows* (`Rows`): the engine's `RowBlocks` entries with padding and markers
//!   for empty block rows (4 % more entries on the 200M-edge web graph).
//!
//! The kernels are variants of one template: `_b3`/`_b4` bound the registers for 3 or 4
//! blocks of 256 threads per SM; `pf` loads the next window's entries before this
//! window's `x` gathers (registers), `async` does so through `cp.async` into shared
//! memory, `l2` only prefetches them into L2, `pfx` also prefetches the next window's `x`
//! into L2, `cs` and `el` give the entries and `y` the streaming hint and `x` the
//! evict-last priority in L2, and `nox` (an ablation, not checked) reads no `x`.
//! The `rowwin_*` kernels (session 19) are variants of the engine's `rowwindows_bits`
//! over the same row windows: `u32` window indices, `half` loads of only the halves of
//! `x` an entry reads, `ldg` reads of `x` through the read-only path, and the `nobits`
//! ablation; `rowwin_u32_half` (0.489 ms against 0.526) became the engine's kernel.
//! Session 20's variants of `rowwin_u32_half`, all slower on the H200 (docs/BENCHMARKS.md,
//! session 20, runs 2 and 4): `rowwin_lf`, a *last finisher* in place of the clear and the
//! atomics of shared parts (their markers number them; the last part of a row to finish
//! ORs the others' sums and stores the row), which saves the clear kernel's launch;
//! `rowwin_scan`, the leading parts handed to their owners by a segmented OR-scan of
//! shuffles; `rowwin_u32_half_b5`, registers bounded for 5 blocks per SM; and the
//! ablations `rows4_pf_b4_nox` / `_nostore`, which bound what any variant can gain on
//! cnr-2000.
//! Session 21's `rowwin_tile` / `rowwin_tile_pf`: each window's rows in a per-warp tile
//! of shared memory, shared atomics for the rows that cross lanes, coalesced copies to `y`
//! (14 % fewer instructions than the engine's kernel on cnr-2000, but 2-3 % slower there
//! than `rowwin_u32_half` and 1 % slower on the web graph: the 32 KB tiles take L1 from the
//! `x` gathers; `_pf` spills; docs/BENCHMARKS.md, session 21). With the device-time loop
//! (`GpuEngine::time_ms` holds the stream first) `rowwin_lf` is still slower than the clear
//! it saves.
//! Session 21: `HEADER_RUNS_ENGINE_DIRS=old=DIR,new=DIR2` also times the engine's own
//! `rowwindows_bits` compiled from each folder of kernel sources (a copy of `cuda/`, as
//! `K2RPQ_KERNEL_DIR` takes), named `engine:old` and so on, over the same row windows: a
//! change to the engine's kernel measured against the kernel before it in one process.
//! `HEADER_RUNS_KERNELS=a,b` runs only the kernels named. Session 18's best, `rows4_pf_b4`,
//! took 0.526 ms on the web graph against 0.620 ms for the engine's product with its clear
//! (0.85x; 0.051-0.052x of cuSPARSE's SpMM).
//!
//! Each product's `y` is checked word for word against the engine's (the engine's own
//! products are checked against the CPU engine by the GPU tests); the experiment's `y` is
//! filled with garbage first, so a word it fails to write shows. Before any GPU work the
//! layouts are checked against the tree's cells on the host (graphs up to 20M cells).
//!
//! ```text
//! header_runs [EDGES=200000000 | EDGE-LIST-FILE] [REPS=30]
//! HEADER_RUNS_GRIDS=0,4 header_runs …   # each kernel with the default grid, then 4 blocks per SM
//! HEADER_RUNS_KERNELS=rowwin_u32_half HEADER_RUNS_ENGINE_DIRS=old=old-cuda,new=cuda header_runs …
//! ```

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use k2rpq::bench::input::web_or_edge_list;
use k2rpq::engine::gpu::{
    block_entries, block_entry, block_entry_parts, compile_module, kernel_sources, row_windows,
    FrontierLayout, GpuEngine, GpuOptions, LeafKernel, PAD_ROW, WINDOW_ENTRIES,
};
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, Traversal};
use rayon::prelude::*;

/// Slots of a window: one warp's, 4 per lane (`WINDOW` in the kernel).
const WINDOW: usize = WINDOW_ENTRIES;
/// A header's row when the slot is padding.
const NONE_ROW: u64 = 0x7FFF_FFFF;
/// Header flag: the row's run crosses windows (cleared first, updated with atomics).
const SHARED_ROW: u64 = 0x8000_0000;
/// Warps per block of the kernel (`WARPS_PER_BLOCK`).
const WARPS: u32 = 8;

/// Fills the rest of the last window with `pad`.
fn pad_window(slots: &mut Vec<u64>, pad: u64) {
    slots.resize(slots.len().next_multiple_of(WINDOW), pad);
}

/// The slots that mark runs in one slot format (functions of the block row).
struct Marks {
    /// The slot that leads every block row's run (header formats), if any.
    head: fn(u64) -> Option<u64>,
    /// The slot of an empty block row, where runs have no head.
    empty: fn(u64) -> u64,
    /// The slot that leads each part of a run longer than a window.
    shared: fn(u64) -> u64,
    /// The slot that fills the end of a window.
    pad: u64,
}

/// Lays `entries` (sorted by block row, `block_row` of each; `slot` its slot) into windows
/// that no run crosses, for block rows `0 .. block_rows`: a run that does not fit the rest
/// of a window starts the next, an empty row still takes a slot (its head or its empty
/// mark), and a run too long for a window is cut into parts of `WINDOW − 1` entries that
/// each start a window behind a shared mark. The slots and the shared block rows.
fn lay_windows<T>(
    entries: &[T],
    block_row: impl Fn(&T) -> u64,
    slot: impl Fn(&T) -> u64,
    block_rows: u64,
    marks: Marks,
) -> (Vec<u64>, Vec<u32>) {
    let mut slots: Vec<u64> = Vec::with_capacity(entries.len() * 9 / 8 + block_rows as usize);
    let mut shared = Vec::new();
    let mut rest = entries;
    for row in 0..block_rows {
        let len = rest.iter().take_while(|e| block_row(e) == row).count();
        let (run, after) = rest.split_at(len);
        rest = after;
        let head = (marks.head)(row);
        let need = (len + head.is_some() as usize).max(1);
        if slots.len() % WINDOW + need > WINDOW {
            pad_window(&mut slots, marks.pad);
        }
        if need <= WINDOW {
            slots.extend(head.or((len == 0).then(|| (marks.empty)(row))));
            slots.extend(run.iter().map(&slot));
        } else {
            shared.push(row as u32);
            for part in run.chunks(WINDOW - 1) {
                pad_window(&mut slots, marks.pad);
                slots.push((marks.shared)(row));
                slots.extend(part.iter().map(&slot));
            }
        }
    }
    assert!(rest.is_empty(), "entries past the last block row");
    pad_window(&mut slots, marks.pad);
    (slots, shared)
}

/// Header-run windows of blocks of `r` rows (4 or 8) and 4 columns from `RowBlocks`
/// entries: the slots and the block rows whose runs cross windows.
fn header_windows(entries: &[u64], r: u32, rows: u64) -> (Vec<u64>, Vec<u32>) {
    // (block row, block column) → bitmap32 with bit 4i + c = cell (r row + i, 4 col + c).
    let mut blocks: Vec<(u64, u32)> = entries
        .par_iter()
        .map(|&e| {
            let (br, bc, bm) = block_entry_parts(e);
            let half = br % (r / 4);
            let key = ((br / (r / 4)) as u64) << 32 | bc as u64;
            (key, (bm as u32) << (16 * half))
        })
        .collect();
    blocks.par_sort_unstable_by_key(|&(k, _)| k);
    let mut merged: Vec<(u64, u32)> = Vec::with_capacity(blocks.len());
    for (k, bm) in blocks {
        match merged.last_mut() {
            Some(last) if last.0 == k => last.1 |= bm,
            _ => merged.push((k, bm)),
        }
    }
    let marks = Marks {
        head: Some,
        empty: |row| row,
        shared: |row| row | SHARED_ROW,
        pad: NONE_ROW,
    };
    lay_windows(
        &merged,
        |&(k, _)| k >> 32,
        |&(k, bm)| (bm as u64) << 32 | (k & 0xFFFF_FFFF),
        rows.div_ceil(r as u64),
        marks,
    )
}

/// A row-entry marker's row when the slot is padding (`NONE_ENTRY_ROW`, the engine's
/// `PAD_ROW`).
const NONE_ENTRY_ROW: u64 = PAD_ROW as u64;

/// Windows of `RowBlocks` entries (4x4 blocks) that no run crosses: the engine's
/// [`row_windows`] (an empty block row gets a marker, a run longer than a window is cut
/// into shared parts, windows end in padding), with no limit on the markers and pads.
fn row_windows_of(entries: &[u64], rows: u64) -> (Vec<u64>, Vec<u32>) {
    let w = row_windows(entries, rows.div_ceil(4) as u32, usize::MAX).expect("row windows");
    (w.entries, w.shared_rows)
}

/// Row windows for `rowwin_lf` (the last finisher): the slots with each shared part's
/// marker holding its part id + 1 in its column field (parts numbered in slot order, so a
/// row's parts have consecutive ids), and for each part id the id of its row's first part
/// and its row's number of parts.
struct LastFinisher {
    slots: Vec<u64>,
    part_first: Vec<u32>,
    part_count: Vec<u32>,
}

/// Column fields a marker can hold (24 bits).
const PART_IDS: usize = 1 << 24;

/// [`LastFinisher`] of the row windows `slots` (of [`row_windows_of`], untouched), checked
/// against their shared rows `shared`.
fn last_finisher(slots: &[u64], shared: &[u32]) -> LastFinisher {
    let mut slots = slots.to_vec();
    let (mut part_first, mut rows) = (Vec::new(), Vec::<u32>::new());
    for s in slots.iter_mut() {
        let (row, col, bm) = block_entry_parts(*s);
        if bm == 0 && row != PAD_ROW && col == 1 {
            let part = part_first.len();
            assert!(part + 1 < PART_IDS, "too many shared parts for a marker");
            let first = match rows.last() {
                Some(&r) if r == row => part_first[part - 1],
                _ => part as u32,
            };
            part_first.push(first);
            rows.push(row);
            *s = block_entry(row, part as u32 + 1, 0);
        }
    }
    // Each row's parts, counted at its first part's id.
    let mut parts = vec![0u32; part_first.len()];
    for &f in &part_first {
        parts[f as usize] += 1;
    }
    let part_count: Vec<u32> = part_first.iter().map(|&f| parts[f as usize]).collect();
    rows.dedup();
    assert_eq!(rows, shared, "the shared parts' rows");
    assert!(
        part_count.iter().all(|&c| c >= 2),
        "a shared row of one part"
    );
    LastFinisher {
        slots,
        part_first,
        part_count,
    }
}

/// [`LastFinisher`] on the device, with `rowwin_lf`'s scratch: four words per part and a
/// counter per part (only first parts' are used), zeroed once (the kernel leaves them
/// zero). Every buffer holds at least one element (no allocation of 0 bytes).
struct LastFinisherDevice {
    slots: CudaSlice<u64>,
    partials: CudaSlice<u64>,
    counters: CudaSlice<u32>,
    part_first: CudaSlice<u32>,
    part_count: CudaSlice<u32>,
}

/// The slot formats of the experiment.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    /// Header-run windows of blocks of 4 or 8 rows ([`header_windows`]).
    Headers(u32),
    /// Windows of `RowBlocks` entries ([`row_windows_of`]).
    Rows,
}

impl Format {
    fn rows(self) -> u32 {
        match self {
            Format::Headers(r) => r,
            Format::Rows => 4,
        }
    }

    fn windows(self, entries: &[u64], rows: u64) -> (Vec<u64>, Vec<u32>) {
        match self {
            Format::Headers(r) => header_windows(entries, r, rows),
            Format::Rows => row_windows_of(entries, rows),
        }
    }

    /// `(row or None for padding, block column, bitmap)` of a slot, and whether it
    /// starts a run; headers have no cells.
    fn decode(self, s: u64) -> (bool, Option<u64>, u64, u32) {
        match self {
            Format::Headers(_) => {
                let bm = (s >> 32) as u32;
                let row = s & !SHARED_ROW;
                (
                    bm == 0,
                    (row != NONE_ROW).then_some(row),
                    s & 0xFFFF_FFFF,
                    bm,
                )
            }
            Format::Rows => {
                let (row, col, bm) = block_entry_parts(s);
                let row = row as u64;
                (
                    bm == 0,
                    (row != NONE_ENTRY_ROW).then_some(row),
                    col as u64,
                    bm as u32,
                )
            }
        }
    }
}

/// `y = A x` read from the slots one by one (a header names the row the entries after
/// it update): checks the layout itself, on the host.
fn slots_product(slots: &[u64], format: Format, x: &[u64], n: u64) -> Vec<u64> {
    let r = format.rows() as u64;
    let mut y = vec![0u64; n as usize];
    let mut row = None;
    for (i, &s) in slots.iter().enumerate() {
        let (marker, at, col, bm) = format.decode(s);
        if i % WINDOW == 0 {
            assert!(
                marker || at != row,
                "a run crosses into window {}",
                i / WINDOW
            );
        }
        // A header names the row of the entries after it; a row entry names its own.
        if marker || format == Format::Rows {
            row = at;
        }
        if bm == 0 {
            continue;
        }
        let row = row.expect("an entry after padding");
        for b in 0..4 * r {
            if bm >> b & 1 != 0 {
                y[(row * r + b / 4) as usize] |= x[(col * 4 + b % 4) as usize];
            }
        }
    }
    y
}

/// `y = A x` the way `rowwin_lf` computes it, on the host: a shared part's sums kept
/// apart under its part id (from its marker), then each row's parts, `part_first ..
/// part_first + part_count`, ORed into its words. Checks the part ids and the arrays.
fn last_finisher_product(lf: &LastFinisher, x: &[u64], n: u64) -> Vec<u64> {
    let mut y = vec![0u64; n as usize];
    let parts = lf.part_first.len();
    let (mut partials, mut part_row) = (vec![[0u64; 4]; parts], vec![None; parts]);
    // The block row of the run, and its part id if it is a shared part.
    let mut run: Option<(u32, Option<usize>)> = None;
    for &s in &lf.slots {
        let (row, col, bm) = block_entry_parts(s);
        if bm == 0 {
            run = (row != PAD_ROW).then_some((row, (col != 0).then(|| col as usize - 1)));
            if let Some((row, Some(part))) = run {
                assert!(part_row[part].replace(row).is_none(), "part {part} twice");
            }
            continue;
        }
        if run.map(|r| r.0) != Some(row) {
            run = Some((row, None));
        }
        let part = run.and_then(|r| r.1);
        for b in 0..16 {
            if bm >> b & 1 != 0 {
                let v = x[col as usize * 4 + b % 4];
                match part {
                    Some(p) => partials[p][b / 4] |= v,
                    None => y[row as usize * 4 + b / 4] |= v,
                }
            }
        }
    }
    for part in 0..parts {
        let (first, count) = (lf.part_first[part] as usize, lf.part_count[part] as usize);
        let row = part_row[part].expect("a part without a marker");
        assert!(
            (first..first + count).contains(&part),
            "part {part} outside its row"
        );
        assert!((first..first + count).all(|q| part_row[q] == Some(row)));
        if part == first {
            for words in &partials[first..first + count] {
                for (i, &w) in words.iter().enumerate() {
                    if let Some(yw) = y.get_mut(row as usize * 4 + i) {
                        *yw |= w;
                    }
                }
            }
        }
    }
    y
}

/// The kernels timed: name, slot format, and whether its `y` is a product (ablations'
/// are not, so they are not checked).
const KERNELS: &[(&str, Format, bool)] = &[
    ("headers4", Format::Headers(4), true),
    ("headers4_b4", Format::Headers(4), true),
    ("headers4_pfx_b4", Format::Headers(4), true),
    ("headers4_cs", Format::Headers(4), true),
    ("headers4_el", Format::Headers(4), true),
    ("headers8", Format::Headers(8), true),
    ("rows4", Format::Rows, true),
    ("rows4_b4", Format::Rows, true),
    ("rows4_b5", Format::Rows, true),
    ("rows4_pf_b3", Format::Rows, true),
    ("rows4_pf_b4", Format::Rows, true),
    ("rows4_async_b4", Format::Rows, true),
    ("rows4_l2_b4", Format::Rows, true),
    ("rows4_pfx_b3", Format::Rows, true),
    ("rows4_pfx_b4", Format::Rows, true),
    ("rows4_async_b4_nox", Format::Rows, false),
    ("rows4_pf_b4_nox", Format::Rows, false),
    ("rows4_pf_b4_nostore", Format::Rows, false),
    ("rowwin_v0", Format::Rows, true),
    ("rowwin_half", Format::Rows, true),
    ("rowwin_ldg", Format::Rows, true),
    ("rowwin_u32", Format::Rows, true),
    ("rowwin_half_ldg", Format::Rows, true),
    ("rowwin_u32_half", Format::Rows, true),
    ("rowwin_u32_ldg", Format::Rows, true),
    ("rowwin_all", Format::Rows, true),
    ("rowwin_nobits", Format::Rows, false),
    ("rowwin_lf", Format::Rows, true),
    ("rowwin_scan", Format::Rows, true),
    ("rowwin_u32_half_b5", Format::Rows, true),
    ("rowwin_tile", Format::Rows, true),
    ("rowwin_tile_pf", Format::Rows, true),
    ("floor_empty", Format::Rows, false),
    ("floor_entries", Format::Rows, false),
    ("floor_gathers", Format::Rows, false),
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let source = args.get(1).map_or("200000000", String::as_str);
    let reps: usize = args.get(2).map_or(30, |s| s.parse().expect("REPS"));
    let (name, g) = web_or_edge_list(source).expect("a number of edges or an edge list");
    let (rows, cols) = (g.rows, g.cols);
    let tree = Arc::new(g.into_tree().expect("tree"));
    let n = rows.max(cols);
    println!("{name}: {} cells, {rows}x{cols}", tree.nnz());

    let entries = block_entries(&tree, FrontierLayout::RowBlocks);
    let words: Vec<u64> = (0..n)
        .map(|i| {
            let z = (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z ^ (z >> 27)
        })
        .collect();
    // The layout against the tree's cells, on the host, for graphs of up to 20M cells.
    if tree.nnz() <= 20_000_000 {
        let mut want = vec![0u64; n as usize];
        for (row, col) in tree.cells() {
            want[row as usize] |= words[col as usize];
        }
        let mut parts = 0;
        for format in [Format::Headers(4), Format::Headers(8), Format::Rows] {
            let (slots, shared) = format.windows(&entries, rows);
            assert!(
                slots_product(&slots, format, &words, n) == want,
                "{format:?}"
            );
            // rowwin_lf's slots: the markers' column fields renumbered, the same cells.
            if format == Format::Rows {
                let lf = last_finisher(&slots, &shared);
                parts = lf.part_first.len();
                assert!(
                    slots_product(&lf.slots, format, &words, n) == want,
                    "{format:?} with part ids"
                );
                assert!(
                    last_finisher_product(&lf, &words, n) == want,
                    "{format:?}, the last finisher"
                );
            }
        }
        println!("host check: every layout holds exactly the cells ({parts} shared parts)");
    }
    let gpu = GpuEngine::with_options(
        0,
        GpuOptions {
            leaf_kernel: LeafKernel::Runs,
            frontier: FrontierLayout::RowBlocks,
            ..GpuOptions::default()
        },
    )
    .unwrap_or_else(|e| {
        eprintln!("header_runs needs a GPU: {e}");
        std::process::exit(2)
    });
    let m = gpu.load(&tree, MatrixConfig::CachedFrontier).expect("load");
    let xb = gpu
        .bits_upload(&BitMatrix::from_words(n as usize, 1, words.clone()))
        .expect("x");
    let mut yb = gpu.bits_zeroed(n as usize, 1).expect("y");
    let product = |yb: &mut _| -> k2rpq::engine::Result<()> {
        gpu.bits_clear(yb)?;
        gpu.bool_product(&m, Direction::Right, &xb, yb, Traversal::Dense)
    };
    let base_ms = gpu.time_ms(reps, || product(&mut yb)).expect("product");
    let want = gpu.bits_download(&yb).expect("y").into_words();
    println!(
        "rowblocks (engine, clear + runs): {base_ms:.4} ms per product, {} entries, {:.1} MB",
        entries.len(),
        entries.len() as f64 * 8e-6
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
    let ptx = compile_ptx_with_opts(include_str!("header_runs.cu"), opts).expect("NVRTC");
    let module = ctx.context().load_module(ptx).expect("module");
    // HEADER_RUNS_ENGINE_DIRS=name=DIR,..: the engine's `rowwindows_bits` from each folder.
    let engine_kernels: Vec<(String, CudaFunction)> = std::env::var("HEADER_RUNS_ENGINE_DIRS")
        .map(|v| {
            v.split(',')
                .filter(|d| !d.is_empty())
                .map(|spec| {
                    let (tag, dir) = spec.split_once('=').unwrap_or((spec, spec));
                    let src = kernel_sources(Some(std::path::Path::new(dir))).expect("sources");
                    let ptx = compile_module(&src, "windows", ctx.arch()).expect("windows.cu");
                    let m = ctx.context().load_module(ptx).expect("module");
                    (
                        format!("engine:{tag}"),
                        m.load_function("rowwindows_bits").expect("rowwindows_bits"),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let x = stream.clone_htod(&words).expect("x");
    // HEADER_RUNS_GRIDS=4,0: each kernel with at most 4 blocks per SM (a grid that stays
    // resident), then with the default cap.
    let grids: Vec<u64> = std::env::var("HEADER_RUNS_GRIDS")
        .unwrap_or_else(|_| "0".into())
        .split(',')
        .map(|g| g.parse().expect("blocks per SM"))
        .collect();
    let sms = ctx
        .context()
        .attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
        .expect("SMs") as u64;
    // HEADER_RUNS_KERNELS=a,b: only these kernels (default: all).
    let only: Option<Vec<String>> = std::env::var("HEADER_RUNS_KERNELS")
        .ok()
        .map(|s| s.split(',').map(str::to_owned).collect());
    let wanted = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|k| k == name));
    for format in [Format::Headers(4), Format::Headers(8), Format::Rows] {
        let engine_here = format == Format::Rows && !engine_kernels.is_empty();
        if !engine_here && !KERNELS.iter().any(|k| k.1 == format && wanted(k.0)) {
            continue;
        }
        let r = format.rows();
        let (slots, shared) = format.windows(&entries, rows);
        let windows = (slots.len() / WINDOW) as u64;
        let clear = module
            .load_function(&format!("clear_rows{r}"))
            .expect("kernel");
        let slots_d = stream.clone_htod(&slots).expect("slots");
        let shared_d = stream.clone_htod(&shared).expect("rows");
        let garbage = vec![0xA5A5_A5A5_A5A5_A5A5u64; n as usize];
        let mut y = stream.clone_htod(&garbage).expect("y");
        let count = shared.len() as u64;
        let clear_cfg = LaunchConfig {
            grid_dim: ((count * r as u64).div_ceil(256).max(1) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let markers = slots.iter().filter(|&&s| format.decode(s).0).count();
        println!(
            "{format:?}: {} slots ({markers} headers, markers or padding), {:.1} MB, {windows} windows, {count} shared rows",
            slots.len(),
            slots.len() as f64 * 8e-6,
        );
        // rowwin_lf's slots (shared markers numbered) and scratch, when it runs.
        let lf_d = (format == Format::Rows && wanted("rowwin_lf")).then(|| {
            let lf = last_finisher(&slots, &shared);
            let parts = lf.part_first.len();
            println!("  rowwin_lf: {parts} shared parts");
            let at_least_one = |v: Vec<u32>| if v.is_empty() { vec![0] } else { v };
            LastFinisherDevice {
                slots: stream.clone_htod(&lf.slots).expect("slots"),
                partials: stream.alloc_zeros(4 * parts.max(1)).expect("partials"),
                counters: stream.alloc_zeros(parts.max(1)).expect("counters"),
                part_first: stream
                    .clone_htod(&at_least_one(lf.part_first))
                    .expect("part_first"),
                part_count: stream
                    .clone_htod(&at_least_one(lf.part_count))
                    .expect("part_count"),
            }
        });
        // The experiment's kernels of this format, then (over row windows) the engine's.
        let mut runs: Vec<(String, CudaFunction, bool)> = KERNELS
            .iter()
            .filter(|k| k.1 == format && wanted(k.0))
            .map(|&(name, _, checked)| {
                let f = module.load_function(name).expect("kernel");
                (name.to_string(), f, checked)
            })
            .collect();
        if format == Format::Rows {
            runs.extend(
                engine_kernels
                    .iter()
                    .map(|(n, f)| (n.clone(), f.clone(), true)),
            );
        }
        for ((name, run, checked), &per_sm) in
            runs.iter().flat_map(|k| grids.iter().map(move |g| (k, g)))
        {
            let (name, checked) = (name.as_str(), *checked);
            // Blocks: one per 8 windows, at most `per_sm` per SM (0: at most 64).
            let cap = if per_sm == 0 { 64 } else { per_sm } * sms;
            let blocks = windows.div_ceil(WARPS as u64).clamp(1, cap) as u32;
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (32 * WARPS, 1, 1),
                shared_mem_bytes: 0,
            };
            let launch = |y: &mut CudaSlice<u64>| -> k2rpq::engine::Result<()> {
                // SAFETY: the arguments match the kernels' parameters, and every buffer
                // holds what the counts say.
                unsafe {
                    // The last finisher: its own slots and scratch, and no clear.
                    if name == "rowwin_lf" {
                        let lf = lf_d.as_ref().expect("rowwin_lf's slots");
                        stream
                            .launch_builder(run)
                            .arg(&lf.slots)
                            .arg(&windows)
                            .arg(&x)
                            .arg(&n)
                            .arg(&mut *y)
                            .arg(&n)
                            .arg(&lf.partials)
                            .arg(&lf.counters)
                            .arg(&lf.part_first)
                            .arg(&lf.part_count)
                            .launch(cfg)
                            .expect("product");
                        return Ok(());
                    }
                    if count > 0 {
                        stream
                            .launch_builder(&clear)
                            .arg(&shared_d)
                            .arg(&count)
                            .arg(&mut *y)
                            .arg(&n)
                            .launch(clear_cfg)
                            .expect("clear");
                    }
                    stream
                        .launch_builder(run)
                        .arg(&slots_d)
                        .arg(&windows)
                        .arg(&x)
                        .arg(&n)
                        .arg(&mut *y)
                        .arg(&n)
                        .launch(cfg)
                        .expect("product");
                }
                Ok(())
            };
            // The first call, on garbage, is the one checked.
            stream.memcpy_htod(&garbage, &mut y).expect("y");
            launch(&mut y).expect("product");
            let got = stream.clone_dtoh(&y).expect("y");
            let wrong = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            let ms = gpu.time_ms(reps, || launch(&mut y)).expect("timing");
            println!(
                "  {name} ({blocks} blocks): {ms:.4} ms per product ({:.3}x rowblocks); {}",
                ms / base_ms,
                match (checked, wrong) {
                    (false, _) => "an ablation, not checked".to_string(),
                    (true, 0) => "y matches the engine's".to_string(),
                    (true, w) => format!("{w} WORDS DIFFER from the engine's"),
                }
            );
        }
    }
}
