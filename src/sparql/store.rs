//! A k2rpq store as the dataset of Oxigraph's SPARQL evaluator (`spareval`'s
//! [`QueryableDataset`]): the store on disk is the only copy of the data.
//!
//! Terms are the dictionary's ids ([`StoreTerm::Id`]); a term the store does not hold (a
//! constant of the query, a computed value) is carried as itself ([`StoreTerm::Other`]).
//! A term the dictionary holds is always an id, so equal internal terms are the same RDF
//! term, as `sameTerm` requires. The path service hands its rows to the evaluator as ids
//! ([`id_term`]), never decoded.
//!
//! A quad pattern reads k²-trees: with its subject bound, the row of the predicate's tree
//! (`s p ?o`); with its object bound, the column (`?s p o`); with both, one cell; with
//! neither, a scan of the whole tree. An unbound predicate reads every relation of the
//! graph. Graph 0 is the default graph; named graphs are named by their names' ids. Every
//! scan streams: cells come out of a depth-first descent as they are asked for, and no
//! relation is materialised to answer a pattern.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use oxrdf::Term;
use spareval::{ExpressionTerm, InternalQuad, QueryableDataset};

use super::SparqlError;
use crate::k2tree::K2Tree;
use crate::store::{GraphId, Store};

/// A term as the evaluator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StoreTerm {
    /// A term of the store's dictionary.
    Id(u32),
    /// A term the store does not hold.
    Other(Arc<OtherTerm>),
}

/// A term the store does not hold (a constant of the query, a computed value), with its
/// value as the expression evaluator reads it: comparisons (`ORDER BY` compares two values
/// per step of its sort) and functions take the value without parsing the term again.
/// Equal and hashed as the term.
#[derive(Clone)]
pub struct OtherTerm {
    term: Term,
    value: ExpressionTerm,
}

impl OtherTerm {
    /// The RDF term.
    pub fn term(&self) -> &Term {
        &self.term
    }
}

impl std::fmt::Debug for OtherTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.term.fmt(f)
    }
}

impl PartialEq for OtherTerm {
    fn eq(&self, other: &Self) -> bool {
        self.term == other.term
    }
}

impl Eq for OtherTerm {}

impl Hash for OtherTerm {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.term.hash(state);
    }
}

/// The high 64 bits of the blank nodes that carry store ids ([`id_term`]).
const ID_MARK: u64 = 0x6b32_7270_7169_6421;

/// A term that stands for store id `id` on its way from the path service to the evaluator,
/// which maps it back to the id without a dictionary look-up ([`StoreQuads`]): a blank
/// node with a reserved 128-bit identifier (a fixed mark in its high 64 bits). A query cannot name
/// a blank node, and the evaluator's fresh ones are random, so no other term takes that
/// form but by a 2^-64 chance.
///
/// ```
/// use k2rpq::sparql::store::{id_of_term, id_term};
/// assert_eq!(id_of_term(&id_term(42)), Some(42));
/// let b: oxrdf::Term = oxrdf::BlankNode::default().into();
/// assert_eq!(id_of_term(&b), None);
/// ```
pub fn id_term(id: u32) -> Term {
    // Each thread keeps the terms of recent ids, one per slot: a blank node formats its
    // 32-digit label when it is made (60 ns), a copy of a kept one costs a few.
    thread_local! {
        static RECENT: RefCell<Vec<(u32, Term)>> = const { RefCell::new(Vec::new()) };
    }
    RECENT.with_borrow_mut(|slots| {
        if slots.is_empty() {
            slots.resize(RECENT_ID_TERMS, (u32::MAX, marked_blank_node(u32::MAX)));
        }
        let slot = &mut slots[id as usize % RECENT_ID_TERMS];
        if slot.0 != id {
            *slot = (id, marked_blank_node(id));
        }
        slot.1.clone()
    })
}

/// The ids whose [`id_term`] a thread keeps (about 70 bytes each).
const RECENT_ID_TERMS: usize = 2048;

/// The blank node of [`id_term`], made anew.
fn marked_blank_node(id: u32) -> Term {
    oxrdf::BlankNode::new_from_unique_id((u128::from(ID_MARK) << 64) | u128::from(id)).into()
}

/// The store id an [`id_term`] stands for.
pub fn id_of_term(term: &Term) -> Option<u32> {
    let Term::BlankNode(b) = term else {
        return None;
    };
    let id = b.as_ref().unique_id()?;
    if (id >> 64) as u64 != ID_MARK {
        return None;
    }
    u32::try_from(id as u64).ok()
}

/// The quads of a store, for spareval ([`QueryableDataset`]).
///
/// ```no_run
/// use std::sync::Arc;
/// use k2rpq::sparql::StoreQuads;
/// use k2rpq::store::Store;
/// use spareval::{QueryEvaluator, QueryResults};
/// let store = Arc::new(Store::open("codex.store".as_ref())?);
/// let query = spargebra::SparqlParser::new().parse_query("SELECT * WHERE { ?s ?p ?o } LIMIT 3")?;
/// if let QueryResults::Solutions(rows) = QueryEvaluator::new().prepare(&query).execute(StoreQuads::new(store))? {
///     for row in rows {
///         println!("{:?}", row?);
///     }
/// }
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct StoreQuads {
    store: Arc<Store>,
    /// `(name id, graph)` of every named graph, by name id.
    named: Arc<[(u32, GraphId)]>,
}

impl StoreQuads {
    /// The quads of `store`.
    pub fn new(store: Arc<Store>) -> Self {
        let mut named: Vec<(u32, GraphId)> = store
            .graphs()
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(g, info)| info.id.map(|id| (id, g)))
            .collect();
        named.sort_unstable();
        StoreQuads {
            store,
            named: named.into(),
        }
    }

    /// The store id of `term`: the counts a path service returns repeat their values,
    /// and the store keeps what it looked up ([`Store::kept_id`]).
    fn look_up(&self, term: &Term) -> Option<u32> {
        self.store.kept_id(term)
    }

    /// The term of id `id`: rows repeat their terms (CoDEx-M's 6,225 `P530` cells hold
    /// 400), and `ORDER BY` decodes both terms of every comparison of its sort
    /// ([`Store::kept_term`]).
    fn decode(&self, id: u32) -> Result<Term, SparqlError> {
        self.store.kept_term(id).ok_or(SparqlError::MissingTerm(id))
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The graph whose name has id `name`.
    fn named_graph(&self, name: u32) -> Option<GraphId> {
        self.named
            .binary_search_by_key(&name, |&(id, _)| id)
            .ok()
            .map(|i| self.named[i].1)
    }

    /// The graphs a pattern's graph selects: `Some(None)` the default graph, `Some(Some(g))`
    /// a named graph, `None` every named graph.
    fn graphs(&self, graph: Option<Option<&StoreTerm>>) -> Vec<(GraphId, Option<u32>)> {
        match graph {
            Some(None) => vec![(0, None)],
            Some(Some(StoreTerm::Id(name))) => self
                .named_graph(*name)
                .map(|g| (g, Some(*name)))
                .into_iter()
                .collect(),
            Some(Some(StoreTerm::Other(_))) => Vec::new(),
            None => self.named.iter().map(|&(id, g)| (g, Some(id))).collect(),
        }
    }
}

/// A bound position of a pattern: `Ok(None)` when unbound, `Err(())` when bound to a term
/// the store does not hold (nothing matches).
fn bound(t: Option<&StoreTerm>) -> Result<Option<u32>, ()> {
    match t {
        None => Ok(None),
        Some(StoreTerm::Id(id)) => Ok(Some(*id)),
        Some(StoreTerm::Other(_)) => Err(()),
    }
}

impl QueryableDataset<'static> for StoreQuads {
    type InternalTerm = StoreTerm;
    type Error = SparqlError;

    fn internal_quads_for_pattern(
        &self,
        subject: Option<&StoreTerm>,
        predicate: Option<&StoreTerm>,
        object: Option<&StoreTerm>,
        graph_name: Option<Option<&StoreTerm>>,
    ) -> impl Iterator<Item = Result<InternalQuad<StoreTerm>, SparqlError>> + use<> {
        let (Ok(s), Ok(p), Ok(o)) = (bound(subject), bound(predicate), bound(object)) else {
            return QuadScan::empty(self.store.clone());
        };
        // Every (graph, predicate) relation the pattern reads, opened as it is reached.
        let mut relations = Vec::new();
        for (g, name) in self.graphs(graph_name) {
            match p {
                Some(p) => {
                    if self
                        .store
                        .predicates(g)
                        .binary_search_by_key(&p, |i| i.id)
                        .is_ok()
                    {
                        relations.push((g, name, p));
                    }
                }
                None => relations.extend(self.store.predicates(g).iter().map(|i| (g, name, i.id))),
            }
        }
        relations.reverse();
        QuadScan {
            store: self.store.clone(),
            relations,
            subject: s,
            object: o,
            current: None,
        }
    }

    fn internal_named_graphs(
        &self,
    ) -> impl Iterator<Item = Result<StoreTerm, SparqlError>> + use<> {
        let named = self.named.clone();
        (0..named.len()).map(move |i| Ok(StoreTerm::Id(named[i].0)))
    }

    fn contains_internal_graph_name(&self, graph_name: &StoreTerm) -> Result<bool, SparqlError> {
        Ok(matches!(graph_name, StoreTerm::Id(id) if self.named_graph(*id).is_some()))
    }

    fn internalize_term(&self, term: Term) -> Result<StoreTerm, SparqlError> {
        if let Some(id) = id_of_term(&term) {
            return Ok(StoreTerm::Id(id));
        }
        Ok(match self.look_up(&term) {
            Some(id) => StoreTerm::Id(id),
            None => StoreTerm::Other(Arc::new(OtherTerm {
                value: term.clone().into(),
                term,
            })),
        })
    }

    fn externalize_term(&self, term: StoreTerm) -> Result<Term, SparqlError> {
        match term {
            StoreTerm::Id(id) => self.decode(id),
            StoreTerm::Other(t) => Ok(Arc::unwrap_or_clone(t).term),
        }
    }

    fn externalize_expression_term(&self, term: StoreTerm) -> Result<ExpressionTerm, SparqlError> {
        match term {
            StoreTerm::Id(id) => Ok(self.decode(id)?.into()),
            StoreTerm::Other(t) => Ok(t.value.clone()),
        }
    }

    fn internalize_expression_term(&self, value: ExpressionTerm) -> Result<StoreTerm, SparqlError> {
        let term: Term = value.clone().into();
        if let Some(id) = id_of_term(&term) {
            return Ok(StoreTerm::Id(id));
        }
        Ok(match self.look_up(&term) {
            Some(id) => StoreTerm::Id(id),
            None => StoreTerm::Other(Arc::new(OtherTerm { term, value })),
        })
    }
}

/// The quads of a pattern, relation after relation.
struct QuadScan {
    store: Arc<Store>,
    /// Relations still to read, last first: graph, graph name id, predicate id.
    relations: Vec<(GraphId, Option<u32>, u32)>,
    subject: Option<u32>,
    object: Option<u32>,
    /// The relation being read: its graph name, predicate and cells.
    current: Option<(Option<u32>, u32, TreeCells)>,
}

impl QuadScan {
    fn empty(store: Arc<Store>) -> Self {
        QuadScan {
            store,
            relations: Vec::new(),
            subject: None,
            object: None,
            current: None,
        }
    }
}

impl Iterator for QuadScan {
    type Item = Result<InternalQuad<StoreTerm>, SparqlError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((name, p, cells)) = &mut self.current {
                if let Some((s, o)) = cells.next() {
                    return Some(Ok(InternalQuad {
                        subject: StoreTerm::Id(s),
                        predicate: StoreTerm::Id(*p),
                        object: StoreTerm::Id(o),
                        graph_name: name.map(StoreTerm::Id),
                    }));
                }
                self.current = None;
            }
            let (g, name, p) = self.relations.pop()?;
            match self.store.relation(g, p) {
                Ok(Some(tree)) => {
                    let line = match (self.subject, self.object) {
                        (None, None) => Line::All,
                        (Some(s), None) => Line::Row(s),
                        (None, Some(o)) => Line::Column(o),
                        (Some(s), Some(o)) => Line::Cell(s, o),
                    };
                    self.current = Some((name, p, TreeCells::new(tree, line)));
                }
                Ok(None) => {}
                Err(e) => {
                    self.relations.clear();
                    return Some(Err(e.into()));
                }
            }
        }
    }
}

/// Calls `f` with the columns of row `k` of `tree` (the rows of column `k` with
/// `by_column`), ascending: off the line lists when they are built, else by a descent
/// whose visits count towards building them ([`TreeCells`]). [`K2Tree::row`] always
/// descends, a rank per node: on CoDEx-M's small relations a third of a sequence's time.
pub(crate) fn for_each_in_line(
    tree: &Arc<K2Tree>,
    by_column: bool,
    k: u32,
    mut f: impl FnMut(u32),
) {
    if let Some(lists) = tree.lines_if_built(by_column) {
        lists.line(k).iter().for_each(|&v| f(v));
        return;
    }
    let line = if by_column {
        Line::Column(k)
    } else {
        Line::Row(k)
    };
    for (r, c) in TreeCells::new(tree.clone(), line) {
        f(if by_column { r } else { c });
    }
}

/// Which cells of a tree a scan reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// Every cell.
    All,
    /// The cells of one row (`s p ?o`).
    Row(u32),
    /// The cells of one column (`?s p o`).
    Column(u32),
    /// One cell, if set.
    Cell(u32, u32),
}

/// The set cells of a k²-tree: a row or a column in ascending order of the free
/// coordinate, the whole tree row by row from the row lists when they are built, else in
/// Morton order by a depth-first descent. Lines are read from the tree's line lists when
/// they are built; a descent's node visits count towards building them
/// ([`K2Tree::lines_after`]), as a walk's do: a descent pays a rank per node visited
/// (~5 ms for the 6,225 cells of CoDEx-M's P530), the row lists a look-up per row.
pub struct TreeCells {
    tree: Arc<K2Tree>,
    line: Line,
    /// Nodes still to visit: (node, level, first row, first column).
    stack: Vec<(u64, u32, u32, u32)>,
    /// A row or column read off the line lists: the free coordinates and the next one.
    listed: Option<(Vec<u32>, usize)>,
    /// The whole tree read off its row lists: the row in `listed` and the index among the
    /// lists' keys of the row after it.
    rows: Option<(u32, usize)>,
    visits: u64,
}

impl TreeCells {
    /// The cells of `line` in `tree`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k2rpq::k2tree::K2Tree;
    /// use k2rpq::sparql::store::{Line, TreeCells};
    /// let tree = Arc::new(K2Tree::from_edges(8, 8, vec![(1, 2), (1, 5), (6, 2)]));
    /// let row: Vec<_> = TreeCells::new(tree.clone(), Line::Row(1)).collect();
    /// assert_eq!(row, vec![(1, 2), (1, 5)]);
    /// let column: Vec<_> = TreeCells::new(tree.clone(), Line::Column(2)).collect();
    /// assert_eq!(column, vec![(1, 2), (6, 2)]);
    /// assert_eq!(TreeCells::new(tree, Line::All).count(), 3);
    /// ```
    pub fn new(tree: Arc<K2Tree>, line: Line) -> Self {
        let mut cells = TreeCells {
            tree,
            line,
            stack: Vec::new(),
            listed: None,
            rows: None,
            visits: 0,
        };
        let (rows, cols) = (cells.tree.rows(), cells.tree.cols());
        let inside = match line {
            Line::All => true,
            Line::Row(r) => (r as u64) < rows,
            Line::Column(c) => (c as u64) < cols,
            Line::Cell(r, c) => (r as u64) < rows && (c as u64) < cols,
        };
        if !inside || cells.tree.nodes() == 0 {
            return cells;
        }
        match line {
            Line::Row(k) | Line::Column(k) => {
                if let Some(lists) = cells.tree.lines_if_built(line == Line::Column(k)) {
                    cells.listed = Some((lists.line(k).to_vec(), 0));
                    return cells;
                }
            }
            Line::All => {
                if cells.tree.lines_if_built(false).is_some() {
                    cells.listed = Some((Vec::new(), 0));
                    cells.rows = Some((0, 0));
                    return cells;
                }
            }
            Line::Cell(..) => {}
        }
        cells.stack.push((0, 0, 0, 0));
        cells
    }
}

impl Iterator for TreeCells {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        if let Some((free, next)) = &mut self.listed {
            loop {
                if let Some(&f) = free.get(*next) {
                    *next += 1;
                    return Some(match (self.line, self.rows) {
                        (Line::Row(r), _) => (r, f),
                        (Line::Column(c), _) => (f, c),
                        (_, Some((r, _))) => (r, f),
                        _ => unreachable!("only lines and row-listed trees are listed"),
                    });
                }
                // The next non-empty row of a tree read off its row lists.
                let (row, key) = self.rows.as_mut()?;
                let lists = self.tree.lines_if_built(false)?;
                let k = *lists.keys().get(*key)?;
                (*row, *key) = (k, *key + 1);
                free.clear();
                free.extend_from_slice(lists.line(k));
                *next = 0;
            }
        }
        let tree = &*self.tree;
        let h = tree.height();
        while let Some((j, d, r0, c0)) = self.stack.pop() {
            if d == h {
                return Some((r0, c0));
            }
            self.visits += 1;
            let shift = h - 1 - d;
            let s = tree.signature(j);
            // Quadrant b: bit 1 the row half, bit 0 the column half.
            let wanted = |b: u8| -> bool {
                let (rb, cb) = ((b >> 1) as u32, (b & 1) as u32);
                let row_ok = |r: u32| (r >> shift) & 1 == rb;
                let col_ok = |c: u32| (c >> shift) & 1 == cb;
                s & (1 << b) != 0
                    && match self.line {
                        Line::All => true,
                        Line::Row(r) => row_ok(r),
                        Line::Column(c) => col_ok(c),
                        Line::Cell(r, c) => row_ok(r) && col_ok(c),
                    }
            };
            if d + 1 == h {
                // A leaf: its cells go on the stack as cells (level `h`), in order.
                for b in (0..4u8).rev() {
                    if wanted(b) {
                        let (r, c) = (r0 | ((b >> 1) as u32), c0 | ((b & 1) as u32));
                        self.stack.push((u64::MAX, h, r, c));
                    }
                }
            } else {
                let first = tree.first_child(j);
                for b in (0..4u8).rev() {
                    if wanted(b) {
                        let child = first + (s & ((1 << b) - 1)).count_ones() as u64;
                        let (r, c) = (
                            r0 | (((b >> 1) as u32) << shift),
                            c0 | (((b & 1) as u32) << shift),
                        );
                        self.stack.push((child, d + 1, r, c));
                    }
                }
            }
        }
        None
    }
}

impl Drop for TreeCells {
    fn drop(&mut self) {
        // A whole tree's descent counts towards its row lists, which read it row by row.
        let by_column = match self.line {
            Line::Row(_) | Line::All => false,
            Line::Column(_) => true,
            Line::Cell(..) => return,
        };
        if self.listed.is_none() && self.visits > 0 {
            self.tree.lines_after(by_column, self.visits);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn only_marked_blank_nodes_carry_ids() {
        for id in [0, 1, 0xff, 0x8000_0000, u32::MAX] {
            assert_eq!(id_of_term(&id_term(id)), Some(id));
        }
        let named: Term = oxrdf::NamedNode::new_unchecked("http://e/a").into();
        assert_eq!(id_of_term(&named), None);
        let mark = format!("{ID_MARK:x}");
        // A label one hexadecimal digit short of an id, one with bits between the mark
        // and the id, and a named blank node that spells the mark.
        for label in [
            format!("{mark}1"),
            format!("{mark}000000010000002a"),
            format!("x{mark}000000000000002a"),
        ] {
            let other: Term = oxrdf::BlankNode::new_unchecked(label.clone()).into();
            assert_eq!(id_of_term(&other), None, "{label}");
        }
        let spelled: Term =
            oxrdf::BlankNode::new_unchecked(format!("{mark}000000000000002a")).into();
        assert_eq!(id_of_term(&spelled), Some(42));
    }

    #[test]
    fn kept_id_terms_are_the_ids_own() {
        // Ids that share slots, in turns, and the placeholder's own id.
        let mut rng = StdRng::seed_from_u64(5);
        let ids: Vec<u32> = (0..20_000)
            .map(|i| match i % 4 {
                0 => rng.random_range(0..8) * RECENT_ID_TERMS as u32,
                1 => u32::MAX,
                _ => rng.random(),
            })
            .collect();
        for id in ids {
            assert_eq!(id_term(id), marked_blank_node(id));
            assert_eq!(id_of_term(&id_term(id)), Some(id));
        }
    }

    #[test]
    fn streamed_cells_are_the_trees_cells() {
        let mut rng = StdRng::seed_from_u64(3);
        for case in 0..200 {
            let n = rng.random_range(1..70u32);
            let edges: Vec<(u32, u32)> = (0..rng.random_range(0..120))
                .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
                .collect();
            let tree = Arc::new(K2Tree::from_edges(n as u64, n as u64, edges));
            // Twice: the first descent builds the row lists of a tree this small, the
            // second reads them.
            for _ in 0..2 {
                let mut all: Vec<(u32, u32)> = TreeCells::new(tree.clone(), Line::All).collect();
                let mut want = tree.cells();
                all.sort_unstable();
                want.sort_unstable();
                assert_eq!(all, want, "case {case}");
            }
            for k in 0..n + 2 {
                let row: Vec<u32> = TreeCells::new(tree.clone(), Line::Row(k))
                    .map(|(r, c)| {
                        assert_eq!(r, k);
                        c
                    })
                    .collect();
                assert_eq!(row, tree.row(k), "case {case} row {k}");
                let column: Vec<u32> = TreeCells::new(tree.clone(), Line::Column(k))
                    .map(|(r, c)| {
                        assert_eq!(c, k);
                        r
                    })
                    .collect();
                assert_eq!(column, tree.column(k), "case {case} column {k}");
                let c = rng.random_range(0..n + 2);
                let cell: Vec<_> = TreeCells::new(tree.clone(), Line::Cell(k, c)).collect();
                let want = if tree.contains(k, c) {
                    vec![(k, c)]
                } else {
                    vec![]
                };
                assert_eq!(cell, want, "case {case} cell {k} {c}");
            }
        }
    }
}
