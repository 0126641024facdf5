//! RESP: the request codec (`parse.rs`) and the reply builder (`reply.rs`).
//!
//! Layer: protocol and errors (the bottom: imports no server module).

pub mod parse;
pub mod reply;
