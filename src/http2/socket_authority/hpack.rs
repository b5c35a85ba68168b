//! The HPACK side of mending (pure): a client's header blocks decoded with a dynamic table no
//! larger than h2 advertised, and encoded again for h2 with `localhost` as the authority, the
//! header list capped before anything is encoded. The seam on `loona-hpack`:
//! `Decoder::set_max_allowed_table_size`, `Decoder::decode_with_cb` and
//! `Encoder::encode_header_into`, nothing else.

use std::io;

use bytes::BytesMut;
use loona_hpack::{Decoder, Encoder, decoder::DecoderError};

use super::{
    HEADER_TABLE_SIZE, MAX_HEADER_LIST_SIZE, broken,
    frames::{Block, put_block},
};

/// What mended blocks name as the authority.
const LOCAL: &[u8] = b"localhost";

/// What a field counts towards a header list's size (RFC 9113 §6.5.2: name, value and 32).
fn field_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// A decoder of the client's blocks: a table size update over what h2 advertised is an error
/// (RFC 7541 §4.2), so the table never holds more than [`HEADER_TABLE_SIZE`].
fn client_decoder() -> Decoder<'static> {
    let mut decoder = Decoder::new();
    decoder.set_max_allowed_table_size(HEADER_TABLE_SIZE);
    decoder
}

fn undecodable(error: DecoderError) -> io::Error {
    match error {
        DecoderError::InvalidMaxDynamicSize => {
            broken("an HPACK table size update over the size advertised")
        }
        error => broken(&format!("a header block HPACK cannot decode ({error:?})")),
    }
}

/// Whether the first block's `:authority` is absent or one h2 accepts. Nothing is kept or
/// encoded: the block passes as it came, and h2 holds it to its own bounds.
pub(super) fn authority_parses(fragment: &[u8]) -> io::Result<bool> {
    let mut parses = true;
    client_decoder()
        .decode_with_cb(fragment, |name, value| {
            if &*name == b":authority" {
                parses = http::uri::Authority::try_from(&*value).is_ok();
            }
        })
        .map_err(undecodable)?;
    Ok(parses)
}

/// The two HPACK contexts of a mended connection: the client's (decoded) and h2's (encoded;
/// `Encoder`'s table is HPACK's default 4096 bytes, the size of h2's own decoder).
pub(super) struct Mender {
    decoder: Decoder<'static>,
    encoder: Encoder<'static>,
    /// A block encoded again: at most the header list cap, reused from block to block.
    encoded: Vec<u8>,
}

impl Default for Mender {
    fn default() -> Self {
        Self {
            decoder: client_decoder(),
            encoder: Encoder::new(),
            encoded: Vec::new(),
        }
    }
}

impl Mender {
    /// Writes `block` again to `out`, `localhost` as its authority, in frames h2 accepts. A
    /// block whose header list (as mended) is over [`MAX_HEADER_LIST_SIZE`] is an error once
    /// the field that crosses it is decoded: that field and the rest are never encoded. The
    /// connection ends then, the encoder's table holding entries h2's never will.
    pub(super) fn write(&mut self, block: &Block<'_>, out: &mut BytesMut) -> io::Result<()> {
        let Mender {
            decoder,
            encoder,
            encoded,
        } = self;
        encoded.clear();
        let mut size = 0usize;
        let mut over = false;
        decoder
            .decode_with_cb(&block.fragment, |name, value| {
                let value: &[u8] = if &*name == b":authority" {
                    LOCAL
                } else {
                    &value
                };
                size = size.saturating_add(field_size(&name, value));
                over |= size > MAX_HEADER_LIST_SIZE as usize;
                if !over {
                    // Writing to a Vec cannot fail.
                    let _ = encoder.encode_header_into((&*name, value), encoded);
                }
            })
            .map_err(undecodable)?;
        if over {
            return Err(broken("a header list over the size advertised"));
        }
        put_block(out, block.stream, block.end_stream, encoded);
        Ok(())
    }

    /// The length of the last block encoded again.
    #[cfg(test)]
    pub(super) fn encoded_len(&self) -> usize {
        self.encoded.len()
    }
}
