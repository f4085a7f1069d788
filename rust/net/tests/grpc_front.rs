//! The gRPC port's front over real sockets: calls from plaintext and TLS HTTP/2 clients passed on
//! to an HTTP/2 server on an abstract Unix socket, and the SendMessage calls the port serves
//! itself sent to a broker over Remoting.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use rmq_net::front::Front;
use rmq_net::grpc::pb;
use rmq_net::grpc::routes::WriteQueue;
use rmq_net::tls::{TlsMode, TlsServer};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn grpc_frame(msg: &[u8]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u8(0);
    b.put_u32(msg.len() as u32);
    b.put_slice(msg);
    b.freeze()
}

/// An HTTP/2 server on a new abstract name answering every call with its path as the message;
/// the abstract names of its peers.
fn upstream() -> (String, Arc<Mutex<Vec<String>>>) {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "rmq-grpc-front-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    let peers = Arc::new(Mutex::new(Vec::new()));
    let seen = peers.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let s = s.unwrap();
            let peer = s.peer_addr().unwrap();
            let peer = peer.as_abstract_name().unwrap_or_default().to_vec();
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&peer).into_owned());
            std::thread::spawn(move || {
                runtime().block_on(async move {
                    s.set_nonblocking(true).unwrap();
                    let s = tokio::net::UnixStream::from_std(s).unwrap();
                    let service = hyper::service::service_fn(|req: Request<_>| async move {
                        let path = req.uri().path().to_string();
                        let mut trailers = HeaderMap::new();
                        trailers.insert("grpc-status", HeaderValue::from_static("0"));
                        let body = Unary {
                            data: Some(grpc_frame(path.as_bytes())),
                            trailers: Some(trailers),
                        };
                        Ok::<_, std::convert::Infallible>(Response::new(body))
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(s), service)
                        .await;
                });
            });
        }
    });
    (name, peers)
}

/// One message, then trailers.
struct Unary {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl http_body::Body for Unary {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(d) = self.data.take() {
            return std::task::Poll::Ready(Some(Ok(http_body::Frame::data(d))));
        }
        std::task::Poll::Ready(
            self.trailers
                .take()
                .map(|t| Ok(http_body::Frame::trailers(t))),
        )
    }
}

/// What a fake broker was sent: per SEND_MESSAGE_V2 its header fields and body.
type Sent = Arc<Mutex<Vec<(HashMap<String, String>, Vec<u8>)>>>;

/// A broker that stores nothing: SEND_MESSAGE_V2 to topic `GONE` is answered TOPIC_NOT_EXIST
/// (17), any other with success and the queue offset counting up from 100.
fn fake_broker() -> (SocketAddr, Sent) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let sent: Sent = Arc::default();
    let seen = sent.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let mut s: TcpStream = s.unwrap();
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut offset = 100;
                loop {
                    let mut len = [0u8; 4];
                    if s.read_exact(&mut len).is_err() {
                        return;
                    }
                    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
                    s.read_exact(&mut frame).unwrap();
                    let word = u32::from_be_bytes(frame[..4].try_into().unwrap());
                    let hlen = (word & 0xFF_FFFF) as usize;
                    let binary = word >> 24 == 1;
                    let (code, opaque, fields) = if binary {
                        read_binary_header(&frame[4..4 + hlen])
                    } else {
                        let h: serde_json::Value =
                            serde_json::from_slice(&frame[4..4 + hlen]).unwrap();
                        let fields = serde_json::from_value(h["extFields"].clone()).unwrap();
                        (
                            h["code"].as_i64().unwrap() as i32,
                            h["opaque"].as_i64().unwrap() as i32,
                            fields,
                        )
                    };
                    let body = frame[4 + hlen..].to_vec();
                    assert_eq!(code, 310);
                    let gone = fields["b"] == "GONE";
                    seen.lock().unwrap().push((fields, body));
                    let (code, remark, ext) = if gone {
                        (17, "topic[GONE] not exist".to_string(), vec![])
                    } else {
                        offset += 1;
                        (
                            0,
                            String::new(),
                            vec![("queueOffset", offset.to_string()), ("msgId", "X".into())],
                        )
                    };
                    // Answered in the request's form, as a broker does.
                    let out = if binary {
                        binary_answer(code, opaque, &remark, &ext)
                    } else {
                        let ext: serde_json::Map<String, serde_json::Value> = ext
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.clone().into()))
                            .collect();
                        let answer = serde_json::json!({"code": code, "opaque": opaque, "flag": 1,
                            "remark": remark, "extFields": ext});
                        let h = serde_json::to_vec(&answer).unwrap();
                        let mut out = Vec::new();
                        out.extend_from_slice(&((4 + h.len()) as u32).to_be_bytes());
                        out.extend_from_slice(&(h.len() as u32).to_be_bytes());
                        out.extend_from_slice(&h);
                        out
                    };
                    s.write_all(&out).unwrap();
                }
            });
        }
    });
    (addr, sent)
}

/// `(code, opaque, extFields)` of a ROCKETMQ binary request header (REMOTING.md §1.3).
fn read_binary_header(h: &[u8]) -> (i32, i32, HashMap<String, String>) {
    let be32 = |at: usize| i32::from_be_bytes(h[at..at + 4].try_into().unwrap());
    let code = i32::from(i16::from_be_bytes([h[0], h[1]]));
    let opaque = be32(5);
    let remark_len = be32(13) as usize;
    let mut at = 17 + remark_len;
    let ext_end = at + 4 + be32(at) as usize;
    at += 4;
    let mut fields = HashMap::new();
    while at < ext_end {
        let k = u16::from_be_bytes([h[at], h[at + 1]]) as usize;
        let key = String::from_utf8(h[at + 2..at + 2 + k].to_vec()).unwrap();
        at += 2 + k;
        let v = be32(at) as usize;
        let value = String::from_utf8(h[at + 4..at + 4 + v].to_vec()).unwrap();
        at += 4 + v;
        fields.insert(key, value);
    }
    assert_eq!(at, h.len(), "the header ends with its extFields");
    (code, opaque, fields)
}

/// A whole answer frame with a binary header.
fn binary_answer(code: i32, opaque: i32, remark: &str, ext: &[(&str, String)]) -> Vec<u8> {
    let mut entries = Vec::new();
    for (k, v) in ext {
        entries.extend_from_slice(&(k.len() as u16).to_be_bytes());
        entries.extend_from_slice(k.as_bytes());
        entries.extend_from_slice(&(v.len() as u32).to_be_bytes());
        entries.extend_from_slice(v.as_bytes());
    }
    let mut h = Vec::new();
    h.extend_from_slice(&(code as i16).to_be_bytes());
    h.push(0);
    h.extend_from_slice(&475i16.to_be_bytes());
    h.extend_from_slice(&opaque.to_be_bytes());
    h.extend_from_slice(&1i32.to_be_bytes());
    h.extend_from_slice(&(remark.len() as u32).to_be_bytes());
    h.extend_from_slice(remark.as_bytes());
    h.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    h.extend_from_slice(&entries);
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + h.len()) as u32).to_be_bytes());
    out.extend_from_slice(&((1u32 << 24) | h.len() as u32).to_be_bytes());
    out.extend_from_slice(&h);
    out
}

#[derive(Debug)]
struct TrustAny;

impl ServerCertVerifier for TrustAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify_tls12_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

type Client = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// An HTTP/2 client of the front at `addr`, over TLS or not; its local address.
async fn client(addr: SocketAddr, secure: bool) -> (Client, SocketAddr) {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let local = tcp.local_addr().unwrap();
    let exec = TokioExecutor::new();
    if secure {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustAny))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (send, conn) = hyper::client::conn::http2::handshake(exec, TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        (send, local)
    } else {
        let (send, conn) = hyper::client::conn::http2::handshake(exec, TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::spawn(conn);
        (send, local)
    }
}

/// Call `method` with `msg`: the answer's message and its grpc-status.
async fn call(c: &mut Client, method: &str, msg: &[u8]) -> (Vec<u8>, String) {
    let req = Request::post(format!(
        "http://localhost/apache.rocketmq.v2.MessagingService/{method}"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(Full::new(grpc_frame(msg)))
    .unwrap();
    c.ready().await.unwrap();
    let resp = c.send_request(req).await.unwrap();
    let collected = resp.into_body().collect().await.unwrap();
    let status = collected
        .trailers()
        .and_then(|t| t.get("grpc-status"))
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = collected.to_bytes();
    assert_eq!(body[0], 0);
    (body[5..].to_vec(), status)
}

#[test]
fn calls_from_plaintext_and_tls_clients_pass_on() {
    let tls = TlsServer::self_signed(TlsMode::Permissive, &["localhost"]).unwrap();
    let (name, peers) = upstream();
    let mut front = Front::start("127.0.0.1", 0, &name, tls).unwrap();
    let addr = front.local_addr();
    runtime().block_on(async {
        let (mut plain, a) = client(addr, false).await;
        let (mut secure, b) = client(addr, true).await;
        for c in [&mut plain, &mut secure] {
            let (msg, status) = call(c, "QueryRoute", b"x").await;
            assert_eq!(msg, b"/apache.rocketmq.v2.MessagingService/QueryRoute");
            assert_eq!(status, "0");
            // SendMessage too, while the port serves no send itself.
            let (msg, _) = call(c, "SendMessage", b"y").await;
            assert_eq!(msg, b"/apache.rocketmq.v2.MessagingService/SendMessage");
        }
        // Each upstream connection is bound to a name the front maps to its client.
        let mut behind: Vec<SocketAddr> = peers
            .lock()
            .unwrap()
            .iter()
            .map(|n| front.peer_of(n).expect("a name the front knows"))
            .collect();
        behind.sort();
        let mut expected = vec![a, b];
        expected.sort();
        assert_eq!(behind, expected);
    });
    let stats = front.stats();
    assert_eq!((stats.tls, stats.plain, stats.refused), (1, 1, 0));
    front.stop();
}

fn message(topic: &str, id: &str) -> pb::Message {
    pb::Message {
        topic: Some(pb::Resource {
            name: topic.into(),
            resource_namespace: String::new(),
        }),
        user_properties: HashMap::new(),
        system_properties: Some(pb::SystemProperties {
            tag: Some("TagA".into()),
            message_id: id.into(),
            ..Default::default()
        }),
        body: format!("body of {id}").into_bytes(),
    }
}

fn send_request(messages: Vec<pb::Message>) -> Vec<u8> {
    pb::SendMessageRequest { messages }.encode_to_vec()
}

#[test]
fn the_port_serves_plain_sends_and_passes_on_the_rest() {
    let tls = TlsServer::self_signed(TlsMode::Permissive, &["localhost"]).unwrap();
    let (name, _) = upstream();
    let (broker, sent) = fake_broker();
    let front = Front::start("127.0.0.1", 0, &name, tls).unwrap();
    let fast = front.fast_sends();
    fast.enable(true, ["UNIQ_KEY".to_string()]);
    let queues: Vec<WriteQueue> = (0..2)
        .map(|i| WriteQueue {
            broker_name: "broker-a".into(),
            queue_id: i,
            addr: broker.to_string(),
        })
        .collect();
    fast.set_topic("T", queues.clone());
    fast.set_topic("GONE", queues);
    runtime().block_on(async {
        let (mut c, local) = client(front.local_addr(), false).await;
        let req = send_request(vec![message("T", "ID1"), message("T", "ID2")]);
        let (msg, status) = call(&mut c, "SendMessage", &req).await;
        assert_eq!(status, "0");
        let answer = pb::SendMessageResponse::decode(&msg[..]).unwrap();
        assert_eq!(answer.status.unwrap().code, pb::Code::Ok as i32);
        let got: Vec<(String, i64)> = answer
            .entries
            .iter()
            .map(|e| (e.message_id.clone(), e.offset))
            .collect();
        assert_eq!(got, vec![("ID1".into(), 101), ("ID2".into(), 102)]);
        {
            let sent = sent.lock().unwrap();
            assert_eq!(sent.len(), 2);
            let (fields, body) = &sent[0];
            assert_eq!(body, b"body of ID1");
            assert_eq!(fields["b"], "T");
            assert_eq!(fields["a"], "T");
            assert_eq!(fields["n"], "broker-a");
            assert_eq!(fields["e"], "1", "round robin from the second queue");
            assert_eq!(sent[1].0["e"], "0");
            let props = &fields["i"];
            assert!(props.contains("UNIQ_KEY\u{1}ID1"), "{props:?}");
            assert!(
                props.contains(&format!("__BORNHOST\u{1}{local}")),
                "{props:?}"
            );
        }
        // What the port does not serve reaches the endpoint: a FIFO message, a topic it has no
        // queues of, a reserved property name.
        let mut fifo = message("T", "ID3");
        fifo.system_properties.as_mut().unwrap().message_group = Some("g".into());
        let mut reserved = message("T", "ID4");
        reserved
            .user_properties
            .insert("UNIQ_KEY".into(), "x".into());
        for req in [vec![fifo], vec![message("U", "ID5")], vec![reserved]] {
            let (msg, _) = call(&mut c, "SendMessage", &send_request(req)).await;
            assert_eq!(msg, b"/apache.rocketmq.v2.MessagingService/SendMessage");
        }
        assert_eq!(sent.lock().unwrap().len(), 2);
        // A broker that no longer has the topic: TOPIC_NOT_FOUND, and the topic is forgotten.
        let gone = send_request(vec![message("GONE", "ID6")]);
        let (msg, _) = call(&mut c, "SendMessage", &gone).await;
        let answer = pb::SendMessageResponse::decode(&msg[..]).unwrap();
        let status = answer.status.unwrap();
        assert_eq!(status.code, pb::Code::TopicNotFound as i32);
        assert_eq!(
            status.message,
            "send to broker-a: broker answered code 17: topic[GONE] not exist"
        );
        assert!(fast.queues("GONE").is_none());
    });
    assert_eq!(fast.served.load(Ordering::Relaxed), 2);
    assert_eq!(fast.passed_on.load(Ordering::Relaxed), 3);
    let rows = fast.latency_rows();
    let total: f64 = rows
        .iter()
        .map(|(_, _, r)| r[..8].iter().sum::<f64>())
        .sum();
    assert_eq!(total, 2.0, "{rows:?}");
    assert!(rows
        .iter()
        .any(|(rpc, code, _)| *rpc == "SendMessage" && code == "topic_not_found"));
}
