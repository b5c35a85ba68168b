//! A deadline on a gRPC request's first message (`limits.header_timeout`): a request whose
//! body has sent nothing that long after the server first waits for it ends with
//! DEADLINE_EXCEEDED, so a stream opened without its message (a stranger's `CallTool` HEADERS,
//! say: refused only once its tool is read) holds its place for that long at most. The timer
//! starts only when the body is first waited for: a request whose message came with its head,
//! as nearly every one does, costs no timer. `CallToolStream` is left to its handler, which
//! bounds its whole first message the same way.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::time::Sleep;
use tonic::{Status, body::Body};
use tower::Service;

// The one method whose handler bounds its first message itself.
use super::{authenticate::CALL_TOOL_STREAM, status::to_status};
use crate::domain::request_error::RequestError;

/// `S`, whose requests must send their first message within a time.
#[derive(Clone)]
pub struct FirstMessage<S> {
    inner: S,
    within: Duration,
}

impl<S> FirstMessage<S> {
    /// `inner`, its requests' first messages due `within` after they are first waited for.
    pub fn new(inner: S, within: Duration) -> Self {
        Self { inner, within }
    }
}

impl<S> Service<http::Request<Body>> for FirstMessage<S>
where
    S: Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path() == CALL_TOOL_STREAM {
            return self.inner.call(request);
        }
        let within = self.within;
        self.inner
            .call(request.map(|body| Body::new(FirstFrameBy::new(body, within))))
    }
}

/// A request body that fails with DEADLINE_EXCEEDED if its first frame is late.
struct FirstFrameBy {
    inner: Body,
    wait: Wait,
}

enum Wait {
    /// Not waited for yet: due this long after it is.
    NotYet(Duration),
    /// Waited for since the timer started, due that long after.
    Since(Pin<Box<Sleep>>, Duration),
    /// A frame came (or the deadline passed): nothing more to watch.
    Over,
}

impl FirstFrameBy {
    fn new(inner: Body, within: Duration) -> Self {
        Self {
            inner,
            wait: Wait::NotYet(within),
        }
    }
}

impl http_body::Body for FirstFrameBy {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if polled.is_ready() {
            this.wait = Wait::Over;
            return polled;
        }
        if let Wait::NotYet(within) = this.wait {
            this.wait = Wait::Since(Box::pin(tokio::time::sleep(within)), within);
        }
        let Wait::Since(sleep, within) = &mut this.wait else {
            return Poll::Pending;
        };
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let late = RequestError::FirstMessageLate(*within);
        this.wait = Wait::Over;
        tracing::debug!(error = %late, "request refused");
        Poll::Ready(Some(Err(to_status(&late))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;
    use http_body_util::{BodyExt as _, StreamBody};

    use super::*;

    fn body_of(
        frames: impl futures::Stream<Item = Result<Frame<Bytes>, Status>> + Send + 'static,
    ) -> Body {
        Body::new(StreamBody::new(frames))
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_sends_nothing_fails_when_due() {
        let within = Duration::from_secs(10);
        let mut body = FirstFrameBy::new(body_of(futures::stream::pending()), within);
        let started = tokio::time::Instant::now();
        let error = body.frame().await.expect("an answer").unwrap_err();
        assert_eq!(started.elapsed(), within);
        assert_eq!(error.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(
            error.message(),
            "the request's first message did not come within 10s (limits.header_timeout)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_that_came_with_its_head_starts_no_timer() {
        let frames = futures::stream::iter([Ok(Frame::data(Bytes::from_static(b"message")))])
            .chain(futures::stream::pending());
        let mut body = FirstFrameBy::new(body_of(frames), Duration::from_secs(10));
        let frame = body.frame().await.expect("a frame").unwrap();
        assert_eq!(frame.into_data().unwrap(), "message");
        assert!(matches!(body.wait, Wait::Over));
        // After it, the body may wait as long as it likes.
        let waited = tokio::time::timeout(Duration::from_secs(60), body.frame()).await;
        assert!(waited.is_err());
    }
}
