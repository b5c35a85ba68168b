//! The pieces that work at the level of HTTP/2 frames, below tonic and h2: the framing itself
//! (`frame`), where a client's first request head ends (`head`, for the first-request deadline),
//! the mending of a Unix socket's `:authority` (`socket_authority`) and large answers written in
//! a few writes (`batched_writes`). Each leans on how h2 behaves; its `//!` says what would let
//! it go, and each has its fuzz or property test.

pub(crate) mod batched_writes;
pub(crate) mod frame;
pub(crate) mod head;
pub mod socket_authority;
