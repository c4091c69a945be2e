//! Our GPU engine as a contender of the SpMV benchmark: one contender per configuration
//! (`k2`, `k2+F`) and offset source (directory, scan) with the default leaf kernel over
//! a frontier of codes, one per block layout of the frontier ([`FrontierLayout`]:
//! `gpu k2+F blocks`, `gpu k2+F rowwin`, and `rowblk`: row-sorted entries without the row
//! windows), plus one per leaf-kernel variant
//! ([`LeafKernel`]) of the configurations measured for each variant (`k2 dir`, `k2+F dir`,
//! `k2+F scan`, and the block layouts for the kernels that read them), so each variant is
//! a row of its own in the same run (named with the variant: `gpu k2+F dir wagg`). A semiring product is recorded once
//! as a CUDA graph ([`GpuEngine::record_product`]) and replayed, timed with CUDA events;
//! its working set is the engine's exact [`GpuEngine::product_bytes`]. A bit-packed
//! product is timed both as called from the host and recorded as a graph
//! ([`GpuEngine::record_bool_product`]).

use std::sync::Arc;

use super::contenders::{
    check_bits_shape, config_name, product_lengths, BitsContender, BitsProduct, Contender,
};
use crate::baseline::{Device, DeviceProduct, Timing};
use k2rpq::engine::gpu::{
    BitsUpdate, DeviceTree, FrontierLayout, GpuBits, GpuEngine, GpuOptions, LeafKernel,
    OffsetSource, ProductGraph, Tuning,
};
use k2rpq::engine::{BitMatrix, Direction, Engine, MatrixConfig, PlusTimes, Result, Traversal};
use k2rpq::k2tree::K2Tree;

/// Tile size of the fixed-tile contenders (`M20`: the tile every plan had before tiles
/// were chosen per plan), beside the default's automatic tiles.
const FIXED_TILE: u64 = 1 << 20;

/// Tiles of the tree-only contenders with more scratch than the automatic tiles allow
/// (a 200M-edge web graph's descent makes ~550 launches with its automatic 2^20-node
/// tiles, 141 with 2^22, 30 with 2^24).
const LARGE_TILES: [u64; 2] = [1 << 22, 1 << 24];

/// `o` with its tuning changed by `f`.
fn tuned(mut o: GpuOptions, f: impl FnOnce(&mut Tuning)) -> GpuOptions {
    f(&mut o.tuning);
    o
}

/// One configuration × offset source of the GPU engine, with the tree loaded.
pub struct GpuContender {
    engine: Arc<GpuEngine>,
    matrix: DeviceTree,
    config: MatrixConfig,
    source: OffsetSource,
    kernel: LeafKernel,
    tile_nodes: Option<u64>,
    /// `GpuOptions::top_nodes` (named ` T<log2>` when not the default).
    top_nodes: u64,
    /// `GpuOptions::overlapped_launches` (named ` serial` when off).
    overlapped: bool,
    /// `GpuOptions::fused_levels` (named ` L<levels>` when not the default).
    fused_levels: u32,
    /// `GpuOptions::subtree_levels` (named ` S<levels>` when not the default).
    subtree_levels: u32,
    /// `GpuOptions::octets` (named ` 4x4` when off: leaf steps over the leaves' parents).
    octets: bool,
    /// `GpuOptions::lone_paths` (named ` P<nodes>` when not the default).
    lone_paths: u32,
    /// The frontier's layout as loaded (`Codes` for tree-only matrices).
    layout: FrontierLayout,
    /// Whether its `RowBlocks` frontier is laid out in row windows (named `rowwin`).
    windows: bool,
    /// Whether it also keeps the entries in row groups (named `rowgrp`).
    groups: bool,
    /// `GpuOptions::row_group_iterations` (named ` I<cap>` when not the default, for
    /// row groups only).
    group_iterations: u32,
}

/// `directory` or `scan`.
pub fn source_name(s: OffsetSource) -> &'static str {
    match s {
        OffsetSource::Directory => "dir",
        OffsetSource::Scan => "scan",
    }
}

impl GpuContender {
    /// The contenders on device 0: (k2, k2+F) × (directory, scan) with the default leaf
    /// kernel over codes, `k2+F` over each block layout, then `k2 dir`, `k2+F dir` and
    /// `k2+F scan` (and the block layouts, for kernels that read them) with each other
    /// variant of `kernels` (all of [`LeafKernel::ALL`] in the benchmark).
    pub fn all(
        tree: &Arc<K2Tree>,
        kernels: &[LeafKernel],
        group_caps: &[u32],
    ) -> Result<Vec<GpuContender>> {
        use FrontierLayout::{Blocks, Both, Codes, ColBlocks, RowBlocks};
        use MatrixConfig::{CachedFrontier, TreeOnly};
        let mut out = Vec::new();
        let mut load = |options: GpuOptions, configs: &[MatrixConfig]| -> Result<()> {
            let engine = Arc::new(GpuEngine::with_options(0, options)?);
            for &config in configs {
                let matrix = engine.load(tree, config)?;
                out.push(GpuContender {
                    layout: matrix.frontier_layout(),
                    windows: matrix.has_row_windows(),
                    groups: matrix.has_row_groups(),
                    matrix,
                    engine: engine.clone(),
                    config,
                    source: options
                        .tuning
                        .offset_source
                        .unwrap_or(OffsetSource::Directory),
                    kernel: options.tuning.leaf_kernel,
                    tile_nodes: options.tuning.tile_nodes,
                    top_nodes: options.tuning.top_nodes,
                    overlapped: options.tuning.overlapped_launches,
                    fused_levels: options.tuning.fused_levels,
                    subtree_levels: options.tuning.subtree_levels,
                    octets: options.tuning.octets,
                    lone_paths: options.tuning.lone_paths,
                    group_iterations: options.tuning.row_group_iterations,
                });
            }
            Ok(())
        };
        let options = |kernel: LeafKernel,
                       (source, frontier): (OffsetSource, FrontierLayout),
                       tile_nodes: Option<u64>| GpuOptions {
            frontier,
            tuning: Tuning {
                offset_source: Some(source),
                leaf_kernel: kernel,
                tile_nodes,
                ..Tuning::default()
            },
        };
        let mut add = |kernel, place, configs: &[MatrixConfig], tile_nodes| {
            load(options(kernel, place, tile_nodes), configs)
        };
        let default = LeafKernel::default();
        let tile = Tuning::default().tile_nodes;
        let (dir, scan) = (OffsetSource::Directory, OffsetSource::Scan);
        for source in [dir, scan] {
            add(default, (source, Codes), &[TreeOnly, CachedFrontier], tile)?;
        }
        for layout in [Blocks, RowBlocks, ColBlocks, Both] {
            add(default, (dir, layout), &[CachedFrontier], tile)?;
        }
        for &kernel in kernels.iter().filter(|&&k| k != default) {
            // `runs` exists over blocks only (over codes it is `rows`).
            if kernel != LeafKernel::Runs {
                add(kernel, (dir, Codes), &[TreeOnly, CachedFrontier], tile)?;
                add(kernel, (scan, Codes), &[CachedFrontier], tile)?;
            }
            // Over blocks `wrank` has no rank to share: it is `rows` there.
            if matches!(
                kernel,
                LeafKernel::Rows | LeafKernel::WarpAgg | LeafKernel::Runs
            ) {
                for layout in [Blocks, RowBlocks] {
                    add(kernel, (dir, layout), &[CachedFrontier], tile)?;
                }
            }
        }
        // The default kernel with the old fixed tiles, against the automatic ones: over
        // the cached frontier one launch instead of one per 2^20 nodes; tree-only, tiles
        // whose scratch fits the matrix's own bytes (fewer bytes, more launches).
        add(
            default,
            (dir, Codes),
            &[TreeOnly, CachedFrontier],
            Some(FIXED_TILE),
        )?;
        // Tree-only with larger tiles than the automatic ones (`M22`, `M24`): on a large
        // matrix fewer launches for more scratch.
        for tile_nodes in LARGE_TILES {
            add(default, (dir, Codes), &[TreeOnly], Some(tile_nodes))?;
        }
        // Tree-only with another host-expanded top level (`T16`: at most 2^16 top nodes;
        // `T18`: at most 2^18; the default 2^20; all within the same bound of the tree's
        // own bytes): more expand launches for fewer resident top codes. `T22` and `T24` go
        // the other way: on a large tree fewer levels to expand for more resident codes
        // (cnr-2000 x 64: 19.9 and 63.1 MB beside its 93 MB tree).
        for top_nodes in [1 << 16, 1 << 18, 1 << 22, 1 << 24] {
            load(
                tuned(options(default, (dir, Codes), tile), |t| {
                    t.top_nodes = top_nodes
                }),
                &[TreeOnly],
            )?;
        }
        // Tree-only descents without their lone cells (` P4`, ` P6`: cells alone below
        // paths of at least 4 or 6 nodes, listed beside the tree), also from a deeper top
        // level (` T24 P4`, ` T24 P6`): on the synthetic web graph they are 6.7-10.3 % of
        // the cells and 38-46 % of the nodes.
        let default_top = Tuning::default().top_nodes;
        for (lone_paths, top_nodes) in [
            (4, default_top),
            (6, default_top),
            (4, 1 << 24),
            (6, 1 << 24),
        ] {
            load(
                tuned(options(default, (dir, Codes), tile), |t| {
                    t.lone_paths = lone_paths;
                    t.top_nodes = top_nodes;
                }),
                &[TreeOnly],
            )?;
        }
        // Tree-only descents whose leaf steps visit the leaves' parents' 4x4 blocks (` 4x4`),
        // against octet leaf steps a level above them; also from a top level of at most
        // 2^18 nodes (` T18 4x4`).
        for top_nodes in [Tuning::default().top_nodes, 1 << 18] {
            load(
                tuned(options(default, (dir, Codes), tile), |t| {
                    t.octets = false;
                    t.top_nodes = top_nodes;
                }),
                &[TreeOnly],
            )?;
        }
        // Row-sorted entries without the row windows (`rowblk`), against the default's
        // (`rowwin`, where the relation's empty rows allow them).
        load(
            tuned(options(default, (dir, RowBlocks), tile), |t| {
                t.row_windows = false
            }),
            &[CachedFrontier],
        )?;
        // The row windows with row groups beside them (`rowgrp`), which bit-packed right
        // products of one word read instead (every other product reads the windows), once
        // per iteration cap asked for (` I<cap>` unless the default): fewer, longer warps
        // against more, shorter ones.
        for &row_group_iterations in group_caps {
            load(
                tuned(options(default, (dir, RowBlocks), tile), |t| {
                    t.row_groups = true;
                    t.row_group_iterations = row_group_iterations;
                }),
                &[CachedFrontier],
            )?;
        }
        // A tree-only descent with a launch per level (` L1`), against the default expand
        // steps of up to three small or thin levels.
        load(
            tuned(options(default, (dir, Codes), tile), |t| t.fused_levels = 1),
            &[TreeOnly],
        )?;
        // Tree-only descents whose last levels go to subtree launches (` S5`, ` S8`),
        // against level-by-level expand steps.
        for subtree_levels in [5, Tuning::MAX_SUBTREE_LEVELS] {
            load(
                tuned(options(default, (dir, Codes), tile), |t| {
                    t.subtree_levels = subtree_levels
                }),
                &[TreeOnly],
            )?;
        }
        // Every step launched after its predecessor ends (` serial`), against the default
        // overlapped launches: tree-only and over row blocks.
        for (place, config) in [((dir, Codes), TreeOnly), ((dir, RowBlocks), CachedFrontier)] {
            load(
                tuned(options(default, place, tile), |t| {
                    t.overlapped_launches = false
                }),
                &[config],
            )?;
        }
        Ok(out)
    }

    fn device(&self) -> Device {
        Device {
            ctx: self.engine.cuda_context().clone(),
            stream: self.engine.stream().clone(),
        }
    }
}

struct GpuProduct<'a> {
    c: &'a GpuContender,
    graph: ProductGraph<f32>,
    working_set: u64,
}

impl DeviceProduct for GpuProduct<'_> {
    fn matrix_bytes(&self) -> u64 {
        self.c.engine.matrix_bytes(&self.c.matrix)
    }
    fn working_set_bytes(&self) -> u64 {
        self.working_set
    }
    fn set_input(&mut self, x: &[f32]) -> Result<()> {
        self.graph.set_x(x)
    }
    fn run(&mut self) -> Result<()> {
        self.graph.launch()
    }
    fn output(&mut self) -> Result<Vec<f32>> {
        self.graph.y()
    }
    fn time(&mut self, warmup: usize, repeats: usize) -> Result<Timing> {
        let graph = &self.graph;
        self.c.device().time(warmup, repeats, || graph.launch())
    }
}

impl Contender for GpuContender {
    fn name(&self) -> String {
        // Over block entries there are no child offsets: the layout takes the source's
        // place (`gpu k2+F blocks`, `rowblk`, `colblk`; a tree too tall for blocks keeps
        // codes and the source's name).
        let place = match self.layout {
            FrontierLayout::Codes => source_name(self.source),
            FrontierLayout::Blocks => "blocks",
            FrontierLayout::RowBlocks if self.groups => "rowgrp",
            FrontierLayout::RowBlocks if self.windows => "rowwin",
            FrontierLayout::RowBlocks => "rowblk",
            FrontierLayout::ColBlocks => "colblk",
            FrontierLayout::Both => "both",
        };
        let mut name = format!("gpu {} {place}", config_name(self.config));
        // The default (`tuned`, the measured winner per product) keeps the plain name.
        if self.kernel != LeafKernel::default() {
            name.push(' ');
            name.push_str(self.kernel.name());
        }
        if let Some(m) = self.tile_nodes {
            name.push_str(&format!(" M{}", m.trailing_zeros()));
        }
        if self.top_nodes != Tuning::default().top_nodes {
            name.push_str(&format!(" T{}", self.top_nodes.trailing_zeros()));
        }
        if self.fused_levels != Tuning::default().fused_levels {
            name.push_str(&format!(" L{}", self.fused_levels));
        }
        if self.subtree_levels != Tuning::default().subtree_levels {
            name.push_str(&format!(" S{}", self.subtree_levels));
        }
        if self.lone_paths != Tuning::default().lone_paths {
            name.push_str(&format!(" P{}", self.lone_paths));
        }
        if self.groups && self.group_iterations != Tuning::default().row_group_iterations {
            name.push_str(&format!(" I{}", self.group_iterations));
        }
        if !self.octets && self.config == MatrixConfig::TreeOnly {
            name.push_str(" 4x4");
        }
        if !self.overlapped {
            name.push_str(" serial");
        }
        name
    }
    fn variants(&self, _dir: Direction, _batch: usize) -> Vec<String> {
        vec!["cuda-graph".into()]
    }
    fn representation_bytes(&self) -> u64 {
        self.engine.matrix_bytes(&self.matrix)
    }
    fn predicted_working_set(&self, dir: Direction, batch: usize) -> u64 {
        self.engine
            .product_bytes(&self.matrix, dir, batch, 4, None)
            .total()
    }
    fn prepare(
        &self,
        dir: Direction,
        batch: usize,
        _variant: &str,
    ) -> Result<Box<dyn DeviceProduct + '_>> {
        let (i, o) = product_lengths(self.matrix.tree(), dir);
        let x = self.engine.zeros::<f32>(i * batch)?;
        let y = self.engine.zeros::<f32>(o * batch)?;
        let graph = self
            .engine
            .record_product::<PlusTimes>(&self.matrix, dir, x, batch, y)?;
        Ok(Box::new(GpuProduct {
            c: self,
            graph,
            working_set: Contender::predicted_working_set(self, dir, batch),
        }))
    }
}

struct GpuBitsProduct<'a> {
    c: &'a GpuContender,
    dir: Direction,
    words: usize,
    x: GpuBits,
    y: GpuBits,
}

impl BitsProduct for GpuBitsProduct<'_> {
    fn working_set_bytes(&self) -> u64 {
        BitsContender::predicted_working_set(self.c, self.dir, self.words)
    }
    fn set_input(&mut self, x: &BitMatrix) -> Result<()> {
        check_bits_shape(x, self.x.shape())?;
        self.x = self.c.engine.bits_upload(x)?;
        Ok(())
    }
    fn run(&mut self) -> Result<()> {
        let e = &self.c.engine;
        e.bool_product_overwrite(
            &self.c.matrix,
            self.dir,
            &self.x,
            &mut self.y,
            Traversal::Dense,
        )
    }
    fn output(&mut self) -> Result<BitMatrix> {
        self.c.engine.bits_download(&self.y)
    }
    fn time(&mut self, warmup: usize, repeats: usize) -> Result<Timing> {
        // Each repeat is `run`: y = A x from a cleared y, as cuSPARSE's SpMM (β = 0)
        // computes it. (OR-ing into a y that already holds A x would let the
        // read-before-atomic skip every update.)
        let device = self.c.device();
        device.time(warmup, repeats, || self.run())
    }
    fn replayed(
        &mut self,
        x: &BitMatrix,
        warmup: usize,
        repeats: usize,
    ) -> Result<Option<(BitMatrix, Timing)>> {
        let e = &self.c.engine;
        let (rows, words) = self.y.shape();
        // As for `time`: each replay clears y first (recorded in the graph).
        let graph = e.record_bool_product(
            &self.c.matrix,
            self.dir,
            e.bits_upload(x)?,
            e.bits_zeroed(rows, words)?,
            Traversal::Dense,
            BitsUpdate::Overwrite,
        )?;
        graph.launch()?;
        let out = graph.y()?;
        let timing = self.c.device().time(warmup, repeats, || graph.launch())?;
        Ok(Some((out, timing)))
    }
}

impl BitsContender for GpuContender {
    fn name(&self) -> String {
        Contender::name(self)
    }
    fn representation_bytes(&self) -> u64 {
        Contender::representation_bytes(self)
    }
    fn predicted_working_set(&self, dir: Direction, words: usize) -> u64 {
        self.engine
            .product_bytes(&self.matrix, dir, 1, 8, Some((words, Traversal::Dense)))
            .total()
    }
    fn prepare(&self, dir: Direction, words: usize) -> Result<Box<dyn BitsProduct + '_>> {
        let (i, o) = product_lengths(self.matrix.tree(), dir);
        let e = &self.engine;
        Ok(Box::new(GpuBitsProduct {
            c: self,
            dir,
            words,
            x: e.bits_zeroed(i, words)?,
            y: e.bits_zeroed(o, words)?,
        }))
    }
}
