//! Query workloads: RPQ log lines (`[id,] S REGEX O`, one per line, `#` comments) or a
//! folder of `.rq` SPARQL files.

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
                shape: "sparql".into(),
                kind: QueryKind::Sparql(text),
            });
        }
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
