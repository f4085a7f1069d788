//! RocketMQ 5.x's messages (`apache.rocketmq.v2`), generated from proto/ by build.rs.
#![allow(clippy::all, clippy::pedantic, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/apache.rocketmq.v2.rs"));
