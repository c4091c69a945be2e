//! The SPARQL 1.1 Protocol's query operation: the three request forms (GET with a
//! `query` parameter, POST of a form, POST of the query itself), the dataset parameters,
//! the statuses of what goes wrong, and the run of a query on the pool.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use k2rpq::sparql::SparqlError;
use oxrdf::NamedNode;
use spargebra::algebra::QueryDataset;
use spargebra::Query;
use tokio::sync::{mpsc, oneshot};

use super::evaluate::{Control, EvaluationError};
use super::log::RequestLog;
use super::negotiate::{self, Format, NegotiationError};
use super::{describe, page, stream, Endpoint};

/// A response with a status and a plain-text message.
pub struct HttpError {
    status: StatusCode,
    message: String,
}

impl HttpError {
    fn new(status: StatusCode, message: impl Into<String>) -> HttpError {
        HttpError {
            status,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> HttpError {
        HttpError::new(StatusCode::BAD_REQUEST, message)
    }

    fn read_only() -> HttpError {
        HttpError::new(
            StatusCode::FORBIDDEN,
            "the store is read-only: this endpoint answers queries, not updates",
        )
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let mut message = self.message;
        if !message.ends_with('\n') {
            message.push('\n');
        }
        (
            self.status,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            message,
        )
            .into_response()
    }
}

impl From<NegotiationError> for HttpError {
    fn from(e: NegotiationError) -> Self {
        match e {
            NegotiationError::NotAcceptable(m) => HttpError::new(StatusCode::NOT_ACCEPTABLE, m),
            NegotiationError::Malformed(m) => HttpError::bad_request(m),
        }
    }
}

/// The parameters of a query request, from the URL and a form body.
#[derive(Default, Debug)]
struct Params {
    query: Vec<String>,
    update: bool,
    default_graphs: Vec<String>,
    named_graphs: Vec<String>,
    format: Vec<String>,
}

impl Params {
    fn add(&mut self, encoded: &[u8]) {
        for (name, value) in form_urlencoded::parse(encoded) {
            match &*name {
                "query" => self.query.push(value.into_owned()),
                "update" => self.update = true,
                "default-graph-uri" => self.default_graphs.push(value.into_owned()),
                "named-graph-uri" => self.named_graphs.push(value.into_owned()),
                "format" | "output" => self.format.push(value.into_owned()),
                _ => {}
            }
        }
    }

    fn of_url(uri: &Uri) -> Params {
        let mut params = Params::default();
        params.add(uri.query().unwrap_or_default().as_bytes());
        params
    }

    /// The `format` parameter, given at most once.
    fn format(&self) -> Result<Option<&str>, HttpError> {
        match self.format.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            _ => Err(HttpError::bad_request("give the format parameter once")),
        }
    }
}

/// The `Accept` header.
fn accept(headers: &HeaderMap) -> Result<Option<&str>, HttpError> {
    headers
        .get(ACCEPT)
        .map(|h| {
            h.to_str()
                .map_err(|_| HttpError::bad_request("the Accept header is not ASCII"))
        })
        .transpose()
}

/// `GET /query` and `GET /sparql`: a query, or without one, the service description or
/// the query page.
pub async fn get_query(
    State(endpoint): State<Arc<Endpoint>>,
    Extension(log): Extension<RequestLog>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let params = Params::of_url(&uri);
    if params.query.is_empty() && !params.update {
        return root(&endpoint, &headers, &params).unwrap_or_else(IntoResponse::into_response);
    }
    answer(endpoint, log, &headers, params, None)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `GET /`: the query page, or the service description when the client asks for RDF.
pub async fn get_root(
    State(endpoint): State<Arc<Endpoint>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    root(&endpoint, &headers, &Params::of_url(&uri)).unwrap_or_else(IntoResponse::into_response)
}

fn root(endpoint: &Endpoint, headers: &HeaderMap, params: &Params) -> Result<Response, HttpError> {
    let format = negotiate::negotiate(accept(headers)?, params.format()?, negotiate::ROOT_FORMATS)?;
    Ok(match format {
        Format::Rdf(rdf) => {
            let base = match headers
                .get(axum::http::header::HOST)
                .and_then(|h| h.to_str().ok())
            {
                Some(host) => format!("http://{host}"),
                None => format!("http://{}", endpoint.address),
            };
            let body = describe::service_description(rdf, &base, &endpoint.evaluator.graphs());
            ([(CONTENT_TYPE, format.content_type())], body).into_response()
        }
        _ => page::query_page(),
    })
}

/// `POST /query` and `POST /sparql`: a form (`application/x-www-form-urlencoded`) or the
/// query itself (`application/sparql-query`); updates are refused.
pub async fn post_query(
    State(endpoint): State<Arc<Endpoint>>,
    Extension(log): Extension<RequestLog>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let run = async {
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
            .ok_or_else(|| {
                HttpError::bad_request(
                    "no Content-Type: send application/sparql-query or application/x-www-form-urlencoded",
                )
            })?;
        let mut params = Params::of_url(&uri);
        let body_query = match content_type.as_str() {
            "application/sparql-query" => Some(
                String::from_utf8(body.to_vec())
                    .map_err(|_| HttpError::bad_request("the query is not UTF-8"))?,
            ),
            "application/x-www-form-urlencoded" => {
                params.add(&body);
                None
            }
            "application/sparql-update" => return Err(HttpError::read_only()),
            other => {
                return Err(HttpError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    format!(
                        "unsupported Content-Type {other}: send application/sparql-query or application/x-www-form-urlencoded"
                    ),
                ))
            }
        };
        answer(endpoint, log, &headers, params, body_query).await
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// `/update`: refused, the store is read-only.
pub async fn update() -> Response {
    HttpError::read_only().into_response()
}

/// The query of a request, parsed, with the request's dataset.
fn parse(params: &Params, body_query: Option<String>) -> Result<Query, HttpError> {
    if params.update {
        return Err(HttpError::read_only());
    }
    let text = match (body_query, params.query.as_slice()) {
        (Some(_), [_, ..]) => {
            return Err(HttpError::bad_request(
                "give the query either in the body or as a parameter, not both",
            ))
        }
        (Some(text), []) => text,
        (None, [text]) => text.clone(),
        (None, []) => return Err(HttpError::bad_request("no query given")),
        (None, _) => return Err(HttpError::bad_request("give the query parameter once")),
    };
    // The parser `query` uses: `SELECT *` lists its columns in order of appearance.
    let mut query = match k2rpq::sparql::parse_query(&text, None) {
        Ok(q) => q,
        Err(SparqlError::Update) => return Err(HttpError::read_only()),
        Err(e) => {
            let message = match e.excerpt(&text) {
                Some(excerpt) => format!("{e}\n{excerpt}"),
                None => e.to_string(),
            };
            return Err(HttpError::bad_request(message));
        }
    };
    if !params.default_graphs.is_empty() || !params.named_graphs.is_empty() {
        let iris = |list: &[String]| {
            list.iter()
                .map(|iri| {
                    NamedNode::new(iri).map_err(|e| {
                        HttpError::bad_request(format!("invalid graph IRI <{iri}>: {e}"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let dataset = QueryDataset {
            default: iris(&params.default_graphs)?,
            named: Some(iris(&params.named_graphs)?),
        };
        // The protocol's dataset replaces the query's FROM and FROM NAMED (SPARQL 1.1
        // Protocol §2.1.4).
        match &mut query {
            Query::Select { dataset: d, .. }
            | Query::Construct { dataset: d, .. }
            | Query::Describe { dataset: d, .. }
            | Query::Ask { dataset: d, .. } => *d = Some(dataset),
        }
    }
    Ok(query)
}

/// Time the response body waits past the deadline for the writer to end the answer
/// itself (with its `cut` note) before it aborts the body.
const DEADLINE_GRACE: Duration = Duration::from_secs(1);

/// Pause before a body's aborting error, so that the rows before it reach the client.
const FLUSH_PAUSE: Duration = Duration::from_millis(20);

/// Stops the evaluation when dropped: when the client leaves before the end, or after the
/// end (harmless then).
struct CancelOnDrop(Control);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Parses, negotiates, waits for a worker, evaluates and streams the answer.
async fn answer(
    endpoint: Arc<Endpoint>,
    log: RequestLog,
    headers: &HeaderMap,
    params: Params,
    body_query: Option<String>,
) -> Result<Response, HttpError> {
    let format_parameter = params.format()?.map(str::to_owned);
    let query = parse(&params, body_query)?;
    let candidates = match query {
        Query::Select { .. } | Query::Ask { .. } => negotiate::RESULT_FORMATS,
        Query::Construct { .. } | Query::Describe { .. } => negotiate::GRAPH_FORMATS,
    };
    let format = negotiate::negotiate(accept(headers)?, format_parameter.as_deref(), candidates)?;
    let limits = &endpoint.limits;
    let permit = match tokio::time::timeout(
        limits.queue_timeout,
        Arc::clone(&endpoint.pool).acquire_owned(),
    )
    .await
    {
        Ok(Ok(permit)) => permit,
        _ => {
            let mut response = HttpError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "busy: all {} workers are evaluating queries and this request waited {} s for one; retry later",
                    limits.workers,
                    limits.queue_timeout.as_secs_f64()
                ),
            )
            .into_response();
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(response);
        }
    };
    let control = Control::new(limits.timeout, limits.row_limit);
    let guard = CancelOnDrop(control.clone());
    let (head_sender, head) = oneshot::channel::<Result<(), EvaluationError>>();
    let (sender, receiver) = mpsc::channel::<stream::Chunk>(4);
    let evaluator = Arc::clone(&endpoint.evaluator);
    let timeout_s = limits.timeout.as_secs_f64();
    let sent = log.sent.clone();
    let worker_control = control.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        match evaluator.evaluate(&query, &worker_control) {
            Err(e) => {
                let _ = head_sender.send(Err(e));
            }
            Ok(answer) => {
                if head_sender.send(Ok(())).is_ok() {
                    stream::write_answer(answer, format, &worker_control, timeout_s, sender, &sent);
                }
            }
        }
    });
    let deadline = tokio::time::Instant::from_std(control.deadline());
    match tokio::time::timeout_at(deadline, head).await {
        Err(_) => {
            control.cancel();
            Err(timeout_error(timeout_s))
        }
        Ok(Err(_)) => Err(HttpError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the evaluation ended without an answer",
        )),
        Ok(Ok(Err(e))) => Err(match e {
            EvaluationError::Timeout => timeout_error(timeout_s),
            EvaluationError::Unsupported(_) => {
                HttpError::new(StatusCode::NOT_IMPLEMENTED, e.to_string())
            }
            e => HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }),
        Ok(Ok(Ok(()))) => {
            let deadline = deadline + DEADLINE_GRACE;
            let body =
                futures_util::stream::unfold(Some((guard, receiver)), move |state| async move {
                    let (guard, mut receiver) = state?;
                    match tokio::time::timeout_at(deadline, receiver.recv()).await {
                        Ok(Some(Err(e))) => {
                            // The server sends what it holds before it reads the next
                            // piece of the body; an error read at once would drop the
                            // rows still in its buffer (a short answer: all of them).
                            tokio::time::sleep(FLUSH_PAUSE).await;
                            Some((Err(e), None))
                        }
                        Ok(Some(chunk)) => Some((chunk, Some((guard, receiver)))),
                        Ok(None) => None,
                        Err(_) => Some((
                            Err(io::Error::other("the answer ran past the timeout")),
                            None,
                        )),
                    }
                });
            Ok((
                [(CONTENT_TYPE, format.content_type())],
                Body::from_stream(body),
            )
                .into_response())
        }
    }
}

fn timeout_error(timeout_s: f64) -> HttpError {
    HttpError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("timeout: the query ran past the endpoint's limit of {timeout_s} s"),
    )
}
