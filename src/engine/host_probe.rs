//! An engine that stands for a device not set up yet.
//!
//! A query bound for a GPU often needs no device at all: the executor walks a constant
//! start on the host first ([`crate::rpq::walk_before_device`]), and a walk that reaches a
//! few nodes is the whole answer. Setting the device up costs more than such a query
//! (the driver's `cuInit` and context take about 0.2 s in a new process on an H100
//! host), so the first queries run against this engine: it behaves as a device engine
//! (not host-resident) and fails every call that would need device memory, noting that
//! one was made. The caller then sets the device up and runs the query again there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::{BitMatrix, Direction, Engine, EngineError, MatrixConfig, Result, Semiring, Traversal};
use crate::k2tree::K2Tree;

/// A device engine without a device: host walks succeed, device work fails.
#[derive(Debug, Default)]
pub struct HostProbe {
    needed: AtomicBool,
}

impl HostProbe {
    /// A probe no query has used yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a run asked for device work (its answer, or error, must then be replaced by
    /// a run on the device).
    pub fn device_needed(&self) -> bool {
        self.needed.load(Ordering::Relaxed)
    }

    fn refuse<T>(&self) -> Result<T> {
        self.needed.store(true, Ordering::Relaxed);
        Err(EngineError::Unavailable(
            "the device is not set up yet".into(),
        ))
    }
}

impl Engine for HostProbe {
    type Matrix = Arc<K2Tree>;
    type Bits = ();

    fn name(&self) -> &'static str {
        "gpu"
    }

    fn load(&self, _tree: &Arc<K2Tree>, _config: MatrixConfig) -> Result<Self::Matrix> {
        self.refuse()
    }

    fn matrix_bytes(&self, _m: &Self::Matrix) -> u64 {
        0
    }

    fn matrix_tree<'m>(&self, m: &'m Self::Matrix) -> &'m Arc<K2Tree> {
        m
    }

    fn load_bytes(&self, _tree: &K2Tree, _config: MatrixConfig) -> u64 {
        0
    }

    fn product<S: Semiring>(
        &self,
        _m: &Self::Matrix,
        _dir: Direction,
        _x: &[S::Elem],
        _batch: usize,
        _y: &mut [S::Elem],
    ) -> Result<()> {
        self.refuse()
    }

    fn bits_zeroed(&self, _rows: usize, _words: usize) -> Result<Self::Bits> {
        self.refuse()
    }

    fn bits_upload(&self, _host: &BitMatrix) -> Result<Self::Bits> {
        self.refuse()
    }

    fn bits_download(&self, _bits: &Self::Bits) -> Result<BitMatrix> {
        self.refuse()
    }

    fn bits_clear(&self, _bits: &mut Self::Bits) -> Result<()> {
        self.refuse()
    }

    fn bits_or(&self, _dst: &mut Self::Bits, _src: &Self::Bits) -> Result<()> {
        self.refuse()
    }

    fn bits_advance(&self, _next: &mut Self::Bits, _visited: &mut Self::Bits) -> Result<u64> {
        self.refuse()
    }

    fn bool_product(
        &self,
        _m: &Self::Matrix,
        _dir: Direction,
        _x: &Self::Bits,
        _y: &mut Self::Bits,
        _traversal: Traversal,
    ) -> Result<()> {
        self.refuse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpq::{evaluate, Endpoint, EvalOptions, MemoryGraph, Path};

    /// Walks that stay small answer on the probe (from a constant, and jointly from a
    /// few candidates); a closure over a long chain from every node asks for the device
    /// and is refused.
    #[test]
    fn walks_answer_and_device_work_is_refused() {
        let g = MemoryGraph::from_triples(vec![(0, 7, 1), (1, 7, 2)]);
        let path = Path::OneOrMore(Path::link(7));
        let probe = HostProbe::new();
        let options = EvalOptions::default();
        for (s, pairs) in [(Endpoint::Const(0), 2), (Endpoint::Var, 3)] {
            let walked = evaluate(&probe, &g, &path, s, Endpoint::Var, &options)
                .expect("a walk needs no device");
            assert_eq!(walked.count, pairs);
        }
        assert!(!probe.device_needed());
        let chain = MemoryGraph::from_triples((0..3000).map(|i| (i, 7, i + 1)).collect());
        let all = evaluate(
            &probe,
            &chain,
            &path,
            Endpoint::Var,
            Endpoint::Var,
            &options,
        );
        assert!(all.is_err());
        assert!(probe.device_needed());
    }

    /// A plan split over several device engines walks a few candidates in front of them
    /// as one engine does: the CPU engine's pairs, no device work.
    #[test]
    fn a_split_walks_few_candidates_first() {
        use crate::engine::{cpu::CpuEngine, MatrixConfig};
        use crate::rpq::{evaluate_split, execute, plan, PerQueryRelations, Share};
        // A binary tree, each node linked to its parent: 255 start nodes in 4 batches.
        let g = MemoryGraph::from_triples((1..256).map(|i| (i, 7, i / 2)).collect());
        let path = Path::OneOrMore(Path::link(7));
        let options = EvalOptions {
            batch_words: 1,
            ..EvalOptions::default()
        };
        let p = plan(&g, &path, Endpoint::Var, Endpoint::Var, &options);
        assert!(p.batches() > 1);
        let want = execute(&CpuEngine::new(), &g, &p, &options).unwrap();
        let (a, b) = (HostProbe::new(), HostProbe::new());
        let mut ra = PerQueryRelations::new(&a, &g, MatrixConfig::default());
        let mut rb = PerQueryRelations::new(&b, &g, MatrixConfig::default());
        let mut shares = [
            Share {
                engine: &a,
                relations: &mut ra,
            },
            Share {
                engine: &b,
                relations: &mut rb,
            },
        ];
        let got = evaluate_split(&g, &p, &options, &mut shares).expect("walked");
        assert_eq!(got.pairs, want.pairs);
        assert!(!a.device_needed() && !b.device_needed());
    }
}
