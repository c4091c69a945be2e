//! Edge-list input: the real web graph read and built into a tree that answers its rows.

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/data/mod.rs"]
mod data;

use common::Csr;
use k2rpq::k2tree::K2Tree;
use k2rpq_bench::input::{read_edges, InputFormat};

/// The real web graph, where the shared data are found.
#[test]
fn cnr_2000_builds_and_answers_rows() {
    let Some(path) = data::data_file("cnr-2000/cnr-2000.arcs.tsv.gz") else {
        return;
    };
    let mut e = read_edges(&path, InputFormat::Tsv, None).unwrap();
    let edges: Vec<(u32, u32)> = e.edges().collect();
    let t = K2Tree::from_codes(e.rows, e.cols, &mut e.codes).unwrap();
    assert_eq!((t.rows(), t.nnz()), (325_557, 3_216_152));
    let csr = Csr::from_edges(t.rows(), t.cols(), &edges);
    for r in (0..t.rows() as u32).step_by(1009) {
        assert_eq!(t.row(r), csr.row(r), "row {r}");
    }
}
