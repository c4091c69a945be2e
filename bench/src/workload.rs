//! Query workloads: RPQ log lines (`[id,] S REGEX O`, one per line, `#` comments), a
//! `.rq` file of SPARQL queries separated by lines holding only `;` (a query's first
//! comment line `# ID: what it asks` names it), or a folder of `.rq` files (one query
//! each, named by the file).

use std::path::{Path, PathBuf};

use k2rpq::rpq::{parse_log_line, LogEndpoint, LogQuery};

/// One query of a workload.
#[derive(Clone, Debug)]
pub struct WorkloadQuery {
    /// Its id (`id,` prefix, file stem, or line number).
    pub id: String,
    /// What to run.
    pub kind: QueryKind,
    /// Its shape, e.g. `c a+ v` or `v a/a* c` (IRIs abstracted to `a`).
    pub shape: String,
}

/// A log-line path query or a whole SPARQL query.
#[derive(Clone, Debug)]
pub enum QueryKind {
    /// `S REGEX O`.
    Path(LogQuery),
    /// SPARQL text from a `.rq` file.
    Sparql(String),
}

impl WorkloadQuery {
    /// The query as SPARQL, for engines that take SPARQL (Oxigraph): a log line
    /// `S REGEX O` becomes `SELECT * WHERE { S REGEX O }`.
    pub fn sparql(&self) -> String {
        match &self.kind {
            QueryKind::Sparql(s) => s.clone(),
            QueryKind::Path(q) => {
                format!(
                    "SELECT * WHERE {{ {} {} {} }}",
                    endpoint(&q.subject),
                    q.path,
                    endpoint(&q.object)
                )
            }
        }
    }
}

fn endpoint(e: &LogEndpoint) -> String {
    match e {
        LogEndpoint::Var(v) => format!("?{v}"),
        LogEndpoint::Iri(i) => format!("<{i}>"),
    }
}

/// Errors reading a workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file or folder cannot be read.
    #[error("{path}: {error}")]
    Io {
        /// What was read.
        path: PathBuf,
        /// Why it failed.
        error: std::io::Error,
    },
    /// A line that is not a valid query.
    #[error("{path} line {line}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// Why.
        reason: String,
    },
    /// Nothing to run.
    #[error("{0}: no queries")]
    Empty(PathBuf),
}

/// Reads a workload from a log file or a folder of `.rq` files.
pub fn read_workload(path: &Path) -> Result<Vec<WorkloadQuery>, WorkloadError> {
    let io = |error| WorkloadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut out = Vec::new();
    if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rq"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|error| WorkloadError::Io {
                path: f.clone(),
                error,
            })?;
            let id = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push(WorkloadQuery {
                id,
                shape: sparql_shape(&text),
                kind: QueryKind::Sparql(text),
            });
        }
    } else if path.extension().is_some_and(|x| x == "rq") {
        let text = std::fs::read_to_string(path).map_err(io)?;
        out = split_queries(&text);
    } else {
        let text = std::fs::read_to_string(path).map_err(io)?;
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let q = parse_log_line(l).map_err(|e| WorkloadError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                reason: e.to_string(),
            })?;
            let id = q.id.clone().unwrap_or_else(|| format!("line{}", i + 1));
            out.push(WorkloadQuery {
                id,
                shape: shape_of(&q),
                kind: QueryKind::Path(q),
            });
        }
    }
    if out.is_empty() {
        return Err(WorkloadError::Empty(path.to_path_buf()));
    }
    Ok(out)
}

/// The queries of a `.rq` workload file: the texts between lines holding only `;`, each
/// named by its first comment line `# ID: …` (else numbered `q1`, `q2`, … in order);
/// pieces that hold only comments are skipped.
///
/// ```
/// use k2rpq_bench::workload::split_queries;
/// let qs = split_queries("# header\n;\n# m1: all\nSELECT * { ?s ?p ?o }\n;\nASK {}\n");
/// assert_eq!(qs.len(), 2);
/// assert_eq!((qs[0].id.as_str(), qs[1].id.as_str()), ("m1", "q2"));
/// assert_eq!(qs[1].shape, "ask");
/// ```
pub fn split_queries(text: &str) -> Vec<WorkloadQuery> {
    let mut out = Vec::new();
    let mut piece = String::new();
    let flush = |piece: &mut String, out: &mut Vec<WorkloadQuery>| {
        let body = std::mem::take(piece);
        let is_code = |l: &&str| !l.trim().is_empty() && !l.trim_start().starts_with('#');
        if !body.lines().any(|l| is_code(&l)) {
            return;
        }
        let named = body
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("# "))
            .and_then(|c| c.split_once(':'))
            .map(|(id, _)| id.trim())
            .filter(|id| !id.is_empty() && !id.contains(char::is_whitespace));
        let id = named.map_or_else(|| format!("q{}", out.len() + 1), str::to_owned);
        out.push(WorkloadQuery {
            id,
            shape: sparql_shape(&body),
            kind: QueryKind::Sparql(body),
        });
    };
    for line in text.lines() {
        if line.trim() == ";" {
            flush(&mut piece, &mut out);
        } else {
            piece.push_str(line);
            piece.push('\n');
        }
    }
    flush(&mut piece, &mut out);
    out
}

/// The shape of a SPARQL query: its form (`select`, `ask`, `construct`, `describe`) and
/// what it uses (`path`, `optional`, `minus`, `union`, `values`, `group`, `order`,
/// `sub`, `filter`, `bind`), e.g. `select path+group+order`; `sparql` when it does not
/// parse.
///
/// ```
/// use k2rpq_bench::workload::sparql_shape;
/// let q = "SELECT ?x WHERE { { SELECT ?x WHERE { ?x <http://e/p>+ ?y } } \
///          MINUS { ?x <http://e/q> ?z } } ORDER BY ?x";
/// assert_eq!(sparql_shape(q), "select minus+order+path+sub");
/// assert_eq!(sparql_shape("ASK { ?x <http://e/p> ?y }"), "ask");
/// ```
pub fn sparql_shape(text: &str) -> String {
    use spargebra::algebra::GraphPattern as G;
    fn walk(p: &G, top: bool, f: &mut std::collections::BTreeSet<&'static str>) {
        let feature = match p {
            G::Path { .. } => Some("path"),
            G::Values { .. } => Some("values"),
            G::LeftJoin { .. } => Some("optional"),
            G::Minus { .. } => Some("minus"),
            G::Union { .. } => Some("union"),
            G::Filter { .. } => Some("filter"),
            G::Extend { .. } => Some("bind"),
            G::Group { .. } => Some("group"),
            G::OrderBy { .. } => Some("order"),
            G::Project { .. } if !top => Some("sub"),
            _ => None,
        };
        f.extend(feature);
        // Below a projection, a projection is a subquery's.
        let top = top && !matches!(p, G::Project { .. });
        for inner in k2rpq::sparql::rewrite::sub_patterns(p) {
            walk(inner, top, f);
        }
    }
    let Ok(q) = spargebra::SparqlParser::new().parse_query(text) else {
        return "sparql".into();
    };
    let (form, pattern) = match &q {
        spargebra::Query::Select { pattern, .. } => ("select", pattern),
        spargebra::Query::Ask { pattern, .. } => ("ask", pattern),
        spargebra::Query::Construct { pattern, .. } => ("construct", pattern),
        spargebra::Query::Describe { pattern, .. } => ("describe", pattern),
    };
    let mut features = std::collections::BTreeSet::new();
    // Sequences of links, which the parser splits into triples, count as paths.
    walk(
        &k2rpq::sparql::rewrite::reassemble_paths(pattern),
        true,
        &mut features,
    );
    // SELECT's own projection and the aggregates' BIND are no features of the query.
    if matches!(q, spargebra::Query::Select { .. }) && features.contains("group") {
        features.remove("bind");
    }
    if features.is_empty() {
        form.to_owned()
    } else {
        format!(
            "{form} {}",
            features.into_iter().collect::<Vec<_>>().join("+")
        )
    }
}

/// The shape of a log query: `c`/`v` ends around the regex with every IRI written `a`.
///
/// ```
/// use k2rpq_bench::workload::shape_of;
/// use k2rpq::rpq::parse_log_line;
/// let q = parse_log_line("?x <http://e/p>/(<http://e/q>)* <http://e/c>").unwrap();
/// assert_eq!(shape_of(&q), "v (a/a*) c");
/// ```
pub fn shape_of(q: &LogQuery) -> String {
    let end = |e: &LogEndpoint| {
        if matches!(e, LogEndpoint::Var(_)) {
            "v"
        } else {
            "c"
        }
    };
    let mut regex = String::new();
    let text = q.path.to_string();
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '<' => {
                for c in chars.by_ref() {
                    if c == '>' {
                        break;
                    }
                }
                regex.push('a');
            }
            ' ' => {}
            c => regex.push(c),
        }
    }
    // spargebra parenthesises single links under postfix operators: (a)* -> a*.
    let regex = regex.replace("(a)", "a");
    format!("{} {} {}", end(&q.subject), regex, end(&q.object))
}

/// The class a query is reported under: the part of its id before the first `/`
/// (`heavy/03` is in class `heavy`), else its shape.
///
/// ```
/// use k2rpq_bench::workload::query_class;
/// assert_eq!(query_class("heavy/03", "v a+ v"), "heavy");
/// assert_eq!(query_class("w12", "v a+ v"), "v a+ v");
/// ```
pub fn query_class<'a>(id: &'a str, shape: &'a str) -> &'a str {
    match id.split_once('/') {
        Some((class, _)) if !class.is_empty() => class,
        _ => shape,
    }
}
