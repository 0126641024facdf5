//! RESP: the request codec (`parse.rs`) and the reply builder (`reply.rs`).

pub mod parse;
pub mod reply;
