//! How often the broker copies a resource's binary content on its way from an MCP server's
//! answer to the gRPC response: measured with a counting allocator, per thread, around the two
//! steps that are ours (base64 → bytes, then protobuf encoding). The JSON parse before them is
//! rmcp's (the base64 text, measured too, for the record).

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
};

use base64::Engine as _;
use prost::Message as _;
use rmcp::model::ReadResourceResult;
use toolbroker::{domain::names::ServerName, faces::grpc::offer_messages::read_response, proto};

/// Counts the bytes allocated (a growing realloc counts its new size) by each thread: this
/// allocator serves the whole test binary, and other tests allocate on other threads meanwhile.
struct Counting;

thread_local! {
    // Const-initialized and without a destructor: reading it never allocates.
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // `try_with`: a thread being torn down may still allocate after its locals are gone.
    let _ = ALLOCATED.try_with(|allocated| allocated.set(allocated.get() + bytes));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes allocated by this thread while `f` runs.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED.get();
    let out = f();
    (out, ALLOCATED.get() - before)
}

const MIB: usize = 1 << 20;

#[test]
fn a_1_mib_blob_is_copied_twice_decoded_once_and_encoded_once() {
    let data: Vec<u8> = (0..MIB).map(|i| (i % 251) as u8).collect();
    let blob = base64::engine::general_purpose::STANDARD.encode(&data);
    let answer = serde_json::json!({"contents": [
        {"uri": "blob://one-mib", "mimeType": "application/octet-stream", "blob": blob}
    ]})
    .to_string();
    drop(blob);

    // rmcp's part: the answer parsed, the base64 text held as a String.
    let (result, parsed) =
        allocated_by(|| serde_json::from_str::<ReadResourceResult>(&answer).unwrap());
    // Ours: base64 decoded into the message's bytes (moved, not copied, into it)...
    let server = ServerName::parse("py").unwrap();
    let (response, converted) = allocated_by(|| read_response(&server, result).unwrap());
    // ...and the message encoded as tonic does, into one buffer.
    let (encoded, encoding) = allocated_by(|| {
        let mut buffer = Vec::with_capacity(response.encoded_len());
        response.encode(&mut buffer).unwrap();
        buffer
    });
    println!(
        "1 MiB blob: rmcp's parse {:.2} MiB (the base64 text); decode {:.2} MiB; encode {:.2} MiB",
        parsed as f64 / MIB as f64,
        converted as f64 / MIB as f64,
        encoding as f64 / MIB as f64,
    );
    let slack = 16 * 1024;
    assert!(
        converted <= MIB + slack,
        "decoded more than once: {converted} bytes"
    );
    assert!(
        encoding <= MIB + slack,
        "encoded more than once: {encoding} bytes"
    );
    let decoded = proto::ReadResourceResponse::decode(encoded.as_slice()).unwrap();
    let Some(proto::resource_contents::Contents::Blob(bytes)) = &decoded.contents[0].contents
    else {
        panic!("a blob");
    };
    assert_eq!(bytes, &data, "every byte intact");
}
