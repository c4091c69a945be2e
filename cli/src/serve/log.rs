//! One line on stderr per request, written when its response has been sent (or the
//! client left): method, path, status, rows, milliseconds, and why an answer was cut.
//!
//! ```text
//! k2rpq serve: GET /query 200 12 rows 3.1 ms
//! k2rpq serve: POST /query 200 1000 rows 41.7 ms cut: limit
//! k2rpq serve: GET /query 400 0 rows 0.2 ms
//! ```

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

use super::stream::{Cut, SentRecord};

/// What the handler tells the log about its response: the rows it sent and any cut.
#[derive(Clone, Default)]
pub struct RequestLog {
    /// Updated by the writer of the answer as rows go out.
    pub sent: SentRecord,
}

/// The line, printed when dropped.
struct LogLine {
    method: Method,
    path: String,
    status: StatusCode,
    started: Instant,
    record: RequestLog,
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let sent = self
            .record
            .sent
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        let mut line = format!(
            "k2rpq serve: {} {} {} {} rows {:.1} ms",
            self.method,
            self.path,
            self.status.as_u16(),
            sent.rows,
            self.started.elapsed().as_secs_f64() * 1e3
        );
        match &sent.cut {
            Some(Cut::Error(e)) => line.push_str(&format!(" cut: error: {e}")),
            Some(cut) => line.push_str(&format!(" cut: {}", cut.reason())),
            None => {}
        }
        if sent.abandoned {
            line.push_str(" (client left)");
        }
        eprintln!("{line}");
    }
}

/// A response body that prints the request's line when it is dropped: after its last
/// byte went out, or when the client left.
struct LoggedBody {
    inner: Body,
    _line: LogLine,
}

impl http_body::Body for LoggedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: gives the handler a [`RequestLog`] and logs the request when its
/// response body is done.
pub async fn log_requests(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let record = RequestLog::default();
    request.extensions_mut().insert(record.clone());
    let response = next.run(request).await;
    let status = response.status();
    response.map(|inner| {
        Body::new(LoggedBody {
            inner,
            _line: LogLine {
                method,
                path,
                status,
                started,
                record,
            },
        })
    })
}
