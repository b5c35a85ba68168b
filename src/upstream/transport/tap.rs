//! A transport wrapper that hands progress notifications, log messages and the server's
//! questions (elicitation, sampling) to the session's [`Interactions`] as they are read, in
//! order and before the answer that follows them: rmcp runs each message's handler as a task
//! of its own, which may run after the answer, when the request they came during has ended.

use std::{future::Future, sync::Arc};

use rmcp::{
    RoleClient,
    model::{ServerJsonRpcMessage, ServerNotification, ServerRequest},
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};

use crate::upstream::session::interactions::Interactions;

/// `T`, with what it reads during requests routed to the requests it belongs to.
pub struct Tapped<T> {
    inner: T,
    interactions: Arc<Interactions>,
}

impl<T> Tapped<T> {
    /// Wraps `inner`.
    pub fn new(inner: T, interactions: Arc<Interactions>) -> Self {
        Self {
            inner,
            interactions,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Tapped<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        match &message {
            ServerJsonRpcMessage::Notification(notification) => match &notification.notification {
                ServerNotification::ProgressNotification(progress) => {
                    self.interactions.progress(progress.params.clone());
                }
                ServerNotification::LoggingMessageNotification(log) => {
                    self.interactions.log(log.params.clone());
                }
                _ => {}
            },
            ServerJsonRpcMessage::Request(request)
                if matches!(
                    request.request,
                    ServerRequest::ElicitRequest(_) | ServerRequest::CreateMessageRequest(_)
                ) =>
            {
                self.interactions.arrived(&request.id);
            }
            _ => {}
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
