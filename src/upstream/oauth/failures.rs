//! rmcp's OAuth errors as [`OAuthFailure`]s: by their type, which says the step; their text (and
//! their causes') is only shown, never read.

use std::error::Error;

use rmcp::transport::auth::{AuthError, enterprise::EmaError};

use crate::domain::outcome::{OAuthFailure, TokenStep};

/// What a failed step at `step` means.
pub fn from_auth(step: TokenStep, error: AuthError) -> OAuthFailure {
    use AuthError as E;
    match error {
        E::DiscoveryRequestFailed { .. }
        | E::ProtectedResourceMetadataInvalid { .. }
        | E::AuthorizationServersUnavailable { .. }
        | E::MetadataError(_)
        | E::NoAuthorizationSupport
        | E::AuthorizationServerMismatch { .. }
        | E::AuthorizationServerMissingIssuer { .. }
        | E::PkceUnsupported => OAuthFailure::Discovery(with_causes(&error)),
        other => OAuthFailure::Token {
            step,
            reason: with_causes(&other),
        },
    }
}

/// What a failed cross-app exchange means.
pub fn from_ema(error: &EmaError) -> OAuthFailure {
    use rmcp::transport::auth::enterprise::EmaExchangeStage;
    let stage = match error {
        EmaError::InvalidResponse { stage, .. }
        | EmaError::RequestFailed(stage)
        | EmaError::InvalidGrant(stage)
        | EmaError::InsufficientUserAuthentication(stage)
        | EmaError::OAuthRejected { stage, .. } => Some(*stage),
        _ => None,
    };
    // An OAuth error answer about the caller's grant is a verdict on the caller, not an
    // outage: it is not retried, and the caller is told.
    if matches!(
        error,
        EmaError::InvalidGrant(_)
            | EmaError::InsufficientUserAuthentication(_)
            | EmaError::OAuthRejected {
                code: "access_denied",
                ..
            }
    ) {
        return OAuthFailure::CallerRefused(with_causes(error));
    }
    let step = match stage {
        Some(EmaExchangeStage::ResourceAuthorizationServer) => TokenStep::AssertionGrant,
        _ => TokenStep::IdentityAssertion,
    };
    OAuthFailure::Token {
        step,
        reason: with_causes(error),
    }
}

/// The error's text and its causes', each once.
pub fn with_causes(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        next = cause.source();
    }
    text
}
