//! The gRPC port's HTTP/2: each client connection served by hyper, every call passed on to the
//! endpoint (grpcio, on its own HTTP/2 connection to the upstream abstract socket) except the
//! SendMessage calls the port serves itself ([`send`], when its owner turned that on).
//!
//! One current-thread tokio runtime per connection, on the connection's thread (the front keeps
//! a thread per connection): the client's HTTP/2 connection, the upstream one, the calls and the
//! Remoting connections to brokers all run there.

pub mod consume;
pub mod pb;
pub mod remoting;
pub mod routes;
pub mod send;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};

use routes::FastSends;

/// The paths of the calls the port may serve itself.
pub const SEND_MESSAGE: &str = "/apache.rocketmq.v2.MessagingService/SendMessage";
pub const RECEIVE_MESSAGE: &str = "/apache.rocketmq.v2.MessagingService/ReceiveMessage";
pub const ACK_MESSAGE: &str = "/apache.rocketmq.v2.MessagingService/AckMessage";
/// HTTP/2 flow-control windows of both connections (bytes).
const STREAM_WINDOW: u32 = 4 << 20;
const CONNECTION_WINDOW: u32 = 16 << 20;

type Answer = BoxBody<Bytes, hyper::Error>;

/// A unary gRPC answer: one message, then the trailers.
struct Unary {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Body for Unary {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if let Some(d) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }
}

fn grpc_response(body: Unary) -> Response<Answer> {
    let mut r = Response::new(body.boxed());
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    r
}

/// A call's answer carrying `messages` (one for a unary call), gRPC status OK.
fn answer_ok<M: prost::Message>(messages: &[M]) -> Response<Answer> {
    let total: usize = messages.iter().map(|m| 5 + m.encoded_len()).sum();
    let mut buf = BytesMut::with_capacity(total);
    for message in messages {
        buf.put_u8(0);
        buf.put_u32(message.encoded_len() as u32);
        message
            .encode(&mut buf)
            .expect("the buffer has room for the message");
    }
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    grpc_response(Unary {
        data: Some(buf.freeze()),
        trailers: Some(trailers),
    })
}

/// A call failed by the port (the endpoint is gone): gRPC status UNAVAILABLE, trailers only.
fn unavailable(why: &str) -> Response<Answer> {
    let mut r = grpc_response(Unary {
        data: None,
        trailers: None,
    });
    let h = r.headers_mut();
    h.insert("grpc-status", HeaderValue::from_static("14"));
    let text: String = why
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if let Ok(v) = HeaderValue::from_str(&text) {
        h.insert("grpc-message", v);
    }
    r
}

/// The one message of a unary call's body (a gRPC frame, uncompressed), or `None`.
fn unary_message(body: &Bytes) -> Option<Bytes> {
    if body.len() < 5 || body[0] != 0 {
        return None;
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    (body.len() == 5 + len).then(|| body.slice(5..))
}

struct Conn {
    upstream: hyper::client::conn::http2::SendRequest<Answer>,
    peer: String,
    fast: Arc<FastSends>,
    brokers: Arc<send::Brokers>,
    acks: consume::Batchers,
}

fn header<'a>(parts: &'a http::request::Parts, name: &str) -> Option<&'a str> {
    parts.headers.get(name).and_then(|v| v.to_str().ok())
}

impl Conn {
    async fn forward(&self, mut req: Request<Answer>) -> Response<Answer> {
        if req.uri().scheme().is_none() {
            let path = req
                .uri()
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/");
            if let Ok(uri) = format!("http://localhost{path}").parse() {
                *req.uri_mut() = uri;
            }
        }
        let mut up = self.upstream.clone();
        if let Err(e) = up.ready().await {
            return unavailable(&format!("the gRPC endpoint is gone: {e}"));
        }
        match up.send_request(req).await {
            Ok(r) => r.map(|b| b.boxed()),
            Err(e) => unavailable(&format!("the gRPC endpoint did not answer: {e}")),
        }
    }

    async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<Answer>, Infallible> {
        let path = req.uri().path();
        let ours = path == SEND_MESSAGE || path == RECEIVE_MESSAGE || path == ACK_MESSAGE;
        if !ours || !self.fast.enabled() {
            return Ok(self.forward(req.map(|b| b.boxed())).await);
        }
        let started = Instant::now();
        let (parts, body) = req.into_parts();
        let raw = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return Ok(unavailable(&format!("the request did not arrive: {e}"))),
        };
        let served = match unary_message(&raw) {
            Some(m) => self.serve(&parts, &m, started).await,
            None => None,
        };
        if let Some(answer) = served {
            return Ok(answer);
        }
        let counts = match parts.uri.path() {
            SEND_MESSAGE => &self.fast.passed_on,
            RECEIVE_MESSAGE => &self.fast.receives.passed_on,
            _ => &self.fast.acks.passed_on,
        };
        counts.fetch_add(1, Ordering::Relaxed);
        let body = Full::new(raw).map_err(|never| match never {}).boxed();
        Ok(self.forward(Request::from_parts(parts, body)).await)
    }

    /// The answer to a call the port serves (`m`: its request message), or `None`.
    async fn serve(
        &self,
        parts: &http::request::Parts,
        m: &[u8],
        started: Instant,
    ) -> Option<Response<Answer>> {
        let fast = &self.fast;
        match parts.uri.path() {
            SEND_MESSAGE => {
                let p = send::prepare(m, &self.peer, fast)?;
                let answer = send::run(p, &self.brokers, fast).await;
                fast.served.fetch_add(1, Ordering::Relaxed);
                fast.record(&send::code_label(answer.status.as_ref()), started.elapsed());
                Some(answer_ok(&[answer]))
            }
            RECEIVE_MESSAGE => {
                let client = header(parts, "x-mq-client-id");
                let deadline = header(parts, "grpc-timeout").and_then(consume::grpc_timeout_ms);
                let r = consume::prepare_receive(m, client, deadline, fast)?;
                let answers = consume::receive(r, &self.brokers, fast).await;
                fast.receives.served.fetch_add(1, Ordering::Relaxed);
                let code = answers.first().and_then(|a| match &a.content {
                    Some(pb::receive_message_response::Content::Status(s)) => Some(s),
                    _ => None,
                });
                fast.record_call("ReceiveMessage", &send::code_label(code), started.elapsed());
                Some(answer_ok(&answers))
            }
            _ => {
                let (request, acks) = consume::prepare_ack(m, fast)?;
                let answer = consume::ack(request, acks, &self.acks, &self.brokers).await;
                fast.acks.served.fetch_add(1, Ordering::Relaxed);
                let code = send::code_label(answer.status.as_ref());
                fast.record_call("AckMessage", &code, started.elapsed());
                Some(answer_ok(&[answer]))
            }
        }
    }
}

/// Serve one client connection `client` (plaintext HTTP/2 after any TLS) until it or `upstream`
/// closes; `peer` names the client (`host:port`) for the messages' born host.
pub async fn serve<C, U>(
    client: C,
    upstream: U,
    peer: String,
    fast: Arc<FastSends>,
) -> Result<(), String>
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    U: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, up_conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .handshake::<_, Answer>(TokioIo::new(upstream))
        .await
        .map_err(|e| format!("the gRPC endpoint refused HTTP/2: {e}"))?;
    let conn = Arc::new(Conn {
        upstream: sender,
        peer,
        fast,
        brokers: Arc::default(),
        acks: consume::Batchers::default(),
    });
    let service = hyper::service::service_fn(move |req| conn.clone().handle(req));
    let served = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_concurrent_streams(1000)
        .serve_connection(TokioIo::new(client), service);
    tokio::select! {
        r = served => r.map_err(|e| format!("HTTP/2: {e}")).or_else(ignore_closed),
        r = up_conn => r.map_err(|e| format!("the gRPC endpoint's connection: {e}")),
    }
}

/// A client that went away mid-connection is no refusal.
fn ignore_closed(e: String) -> Result<(), String> {
    let gone = [
        "connection reset",
        "broken pipe",
        "connection closed",
        "not connected",
    ];
    if gone.iter().any(|g| e.to_ascii_lowercase().contains(g)) {
        Ok(())
    } else {
        Err(e)
    }
}
