//! Unary answers sent as already-encoded bytes. tonic encodes every message into a buffer of
//! its own, which for ListTools would copy the cached catalog (megabytes for thousands of
//! tools) once per request and hold that copy until the client has read it. A handler whose
//! answer is already encoded puts its slices in the response's extensions as [`PreEncoded`];
//! this layer then sends them as the body (gRPC's 5-byte prefix, the slices, `grpc-status: 0`)
//! in place of tonic's, which is dropped unpolled, so nothing is encoded or copied again.
//!
//! **What would let it go**: tonic accepting an encoded message as a unary answer (a
//! `Bytes`-typed codec per method would do it, at the cost of the generated service). It
//! replaces a response body after tonic's handler, through tower's public `Service`; its
//! property test holds the body to gRPC's framing for any slices.

use std::{
    convert::Infallible,
    task::{Context, Poll},
};

use bytes::{BufMut as _, Bytes, BytesMut};
use futures::{TryFutureExt as _, future::MapOk};
use http::{HeaderMap, HeaderValue};
use http_body::Frame;
use http_body_util::StreamBody;
use tonic::{body::Body, server::NamedService};
use tower::Service;

/// The encoded message of a unary answer, in order (slices of a shared buffer).
#[derive(Clone, Debug)]
pub struct PreEncoded(pub Vec<Bytes>);

/// `S`, its pre-encoded answers sent as they are.
#[derive(Clone)]
pub struct PassThrough<S> {
    inner: S,
}

impl<S> PassThrough<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S: NamedService> NamedService for PassThrough<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for PassThrough<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = MapOk<S::Future, fn(http::Response<Body>) -> http::Response<Body>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.inner.call(request).map_ok(send_as_is)
    }
}

/// The response with its body replaced by its [`PreEncoded`] message, if it has one.
fn send_as_is(mut response: http::Response<Body>) -> http::Response<Body> {
    let Some(PreEncoded(chunks)) = response.extensions_mut().remove::<PreEncoded>() else {
        return response;
    };
    // A compressed answer must go through tonic's encoder (the broker enables none today).
    if !response.headers().contains_key("grpc-encoding") {
        *response.body_mut() = Body::new(body(chunks));
    }
    response
}

/// Below this size a message goes in one frame with its prefix: copying a few kilobytes costs
/// less than a frame (and perhaps a write) more.
const COPY_BELOW: usize = 16 * 1024;

/// A gRPC body of one uncompressed message made of `chunks`, then the OK status.
fn body(
    chunks: Vec<Bytes>,
) -> StreamBody<impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>>> {
    let len: usize = chunks.iter().map(Bytes::len).sum();
    let small = len < COPY_BELOW;
    let mut prefix = BytesMut::with_capacity(if small { 5 + len } else { 5 });
    prefix.put_u8(0); // not compressed
    prefix.put_u32(u32::try_from(len).expect("answers are far under 4 GiB (max_response_bytes)"));
    let chunks = if small {
        chunks.iter().for_each(|chunk| prefix.put_slice(chunk));
        Vec::new()
    } else {
        chunks
    };
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = std::iter::once(prefix.freeze())
        .chain(chunks.into_iter().filter(|c| !c.is_empty()))
        .map(Frame::data)
        .chain(std::iter::once(Frame::trailers(trailers)))
        .map(Ok);
    StreamBody::new(futures::stream::iter(frames))
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    #[tokio::test]
    async fn the_body_is_the_prefix_the_chunks_in_order_and_an_ok_status() {
        let big = Bytes::from(vec![7; COPY_BELOW]);
        let chunks = vec![Bytes::from_static(b"abc"), Bytes::new(), big.clone()];
        let mut body = body(chunks);
        let mut data = Vec::new();
        let mut trailers = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.unwrap();
            match frame.into_data() {
                Ok(bytes) => data.push(bytes),
                Err(frame) => trailers = frame.into_trailers().ok(),
            }
        }
        assert_eq!(data[0].as_ref(), &[0, 0, 0, 0x40, 3]); // 16,387
        assert_eq!(data[1].as_ref(), b"abc");
        assert_eq!(data[2].as_ptr(), big.as_ptr(), "sent, not copied");
        assert_eq!(data.len(), 3, "the empty chunk is not sent");
        assert_eq!(trailers.unwrap()["grpc-status"], "0");
    }

    #[tokio::test]
    async fn a_small_message_is_one_frame_with_its_prefix() {
        let mut body = body(vec![Bytes::from_static(b"ab"), Bytes::from_static(b"c")]);
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first.as_ref(), b"\0\0\0\0\x03abc");
        let second = body.frame().await.unwrap().unwrap();
        assert!(second.is_trailers());
    }

    async fn collected(response: http::Response<Body>) -> Bytes {
        response.into_body().collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn only_a_response_with_an_uncompressed_pre_encoded_message_is_replaced() {
        let tonics = || {
            http::Response::new(Body::new(http_body_util::Full::new(Bytes::from_static(
                b"tonic",
            ))))
        };
        let plain = send_as_is(tonics());
        assert_eq!(collected(plain).await.as_ref(), b"tonic");

        let mut pre_encoded = tonics();
        pre_encoded
            .extensions_mut()
            .insert(PreEncoded(vec![Bytes::from_static(b"ours")]));
        let replaced = send_as_is(pre_encoded);
        assert!(replaced.extensions().get::<PreEncoded>().is_none());
        assert_eq!(collected(replaced).await.as_ref(), b"\0\0\0\0\x04ours");

        let mut compressed = tonics();
        compressed
            .extensions_mut()
            .insert(PreEncoded(vec![Bytes::from_static(b"ours")]));
        compressed
            .headers_mut()
            .insert("grpc-encoding", HeaderValue::from_static("gzip"));
        assert_eq!(collected(send_as_is(compressed)).await.as_ref(), b"tonic");
    }

    proptest::proptest! {
        /// For any slices of any sizes, around the copy threshold: the data is gRPC's framing
        /// of their concatenation (a 0 flag, the length, the bytes), no data frame is empty,
        /// and the body ends with one trailers frame holding the OK status.
        #[test]
        fn any_chunks_make_one_framed_message_and_an_ok_status(
            sizes in proptest::collection::vec(0usize..(2 * COPY_BELOW), 0..6),
            seed in proptest::num::u8::ANY,
        ) {
            let chunks: Vec<Bytes> = sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| Bytes::from(vec![seed.wrapping_add(i as u8); size]))
                .collect();
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let frames: Vec<Frame<Bytes>> = runtime.block_on(async {
                let mut body = body(chunks.clone());
                let mut frames = Vec::new();
                while let Some(frame) = body.frame().await {
                    frames.push(frame.unwrap());
                }
                frames
            });
            let (last, data) = frames.split_last().unwrap();
            proptest::prop_assert_eq!(&last.trailers_ref().unwrap()["grpc-status"], "0");
            let data: Vec<&Bytes> = data.iter().map(|f| f.data_ref().expect("data before the trailers")).collect();
            proptest::prop_assert!(data.iter().all(|d| !d.is_empty()));
            let sent: Vec<u8> = data.iter().flat_map(|d| d.iter().copied()).collect();
            let message = chunks.concat();
            let mut expected = vec![0];
            expected.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
            expected.extend_from_slice(&message);
            proptest::prop_assert_eq!(sent, expected);
        }
    }
}
