//! Shared by the integration tests: a store in a temporary directory, a fast path over it and
//! request frames.
#![allow(dead_code)]

use std::sync::Arc;

use rmq_net::{FastSend, FastSendConfig};
use rmq_store::{MessageStore, StoreConfig};

pub fn store(dir: &std::path::Path, sync: bool) -> Arc<MessageStore> {
    let mut cfg = StoreConfig::default();
    cfg.set("storePathRootDir", dir.to_str().unwrap()).unwrap();
    cfg.set("mappedFileSizeCommitLog", "1048576").unwrap();
    if sync {
        cfg.set("flushDiskType", "SYNC_FLUSH").unwrap();
    }
    Arc::new(MessageStore::open(cfg).unwrap())
}

pub fn fast(store: Arc<MessageStore>, trace_on: bool) -> FastSend {
    FastSend::new(
        store,
        FastSendConfig {
            cluster_name: "DefaultCluster".into(),
            region_id: "DefaultRegion".into(),
            trace_on,
            max_body: 1 << 20,
            version: 409,
        },
    )
}

/// A request frame with a JSON header.
pub fn frame(code: i32, flag: i32, opaque: i32, ext: &str, body: &[u8]) -> Vec<u8> {
    let header = format!(
        "{{\"code\":{code},\"extFields\":{ext},\"flag\":{flag},\"language\":\"CPP\",\"opaque\":{opaque},\"serializeTypeCurrentRPC\":\"JSON\",\"version\":409}}"
    );
    let mut f = Vec::new();
    f.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
    f.extend_from_slice(&(header.len() as u32).to_be_bytes());
    f.extend_from_slice(header.as_bytes());
    f.extend_from_slice(body);
    f
}

/// The records of a pull answer's body (or a store read), decoded.
pub fn records(buf: &[u8]) -> Vec<rmq_store::message::Record<'_>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let size = i32::from_be_bytes(buf[pos..pos + 4].try_into().unwrap()) as usize;
        out.push(rmq_store::message::decode(&buf[pos..pos + size], true).unwrap());
        pos += size;
    }
    out
}
