//! `ListToolsResponse` with a second form: the bytes of an answer encoded once per catalog
//! revision, sent as they are. Generated code uses this type in place of prost's (an
//! `extern_path` in build.rs), so ListTools neither converts nor clones a tool per request:
//! it concatenates the cached encodings of the tools the caller may see.

use bytes::{BufMut, Bytes, BytesMut};
use prost::{
    DecodeError, Message,
    encoding::{DecodeContext, WireType, encode_key, encode_varint, message, skip_field, uint64},
};

use super::Tool;

/// `toolbroker.v1.ListToolsResponse`: the tools (sorted by name) and the catalog revision.
#[derive(Clone, PartialEq, Default, Debug)]
pub struct ListToolsResponse {
    /// The tools, sorted by name (empty when the answer was built pre-encoded).
    pub tools: Vec<Tool>,
    /// The catalog revision these tools belong to.
    pub revision: u64,
    /// When set, the encoded fields, written instead of `tools` and `revision`.
    encoded: Option<Bytes>,
}

const TOOLS: u32 = 1;
const REVISION: u32 = 2;

/// Every tool of one revision, each encoded as its `tools` field (key, length, message), and
/// the whole answer that holds them all.
#[derive(Debug, Default)]
pub struct EncodedTools {
    /// The answer with every tool and the revision: sent as it is to callers who see all.
    whole: Bytes,
    /// Each tool's field, a slice of `whole` (no copy).
    fields: Vec<Bytes>,
    revision: u64,
}

impl EncodedTools {
    /// Encodes each tool once.
    pub fn new(tools: &[Tool], revision: u64) -> Self {
        let mut whole = BytesMut::new();
        let mut ends = Vec::with_capacity(tools.len());
        for tool in tools {
            let len = tool.encoded_len();
            whole.reserve(len + 8);
            encode_key(TOOLS, WireType::LengthDelimited, &mut whole);
            encode_varint(len as u64, &mut whole);
            tool.encode_raw(&mut whole);
            ends.push(whole.len());
        }
        if revision != 0 {
            uint64::encode(REVISION, &revision, &mut whole);
        }
        let whole = whole.freeze();
        let starts = std::iter::once(0).chain(ends.iter().copied());
        let fields = starts
            .zip(ends.iter().copied())
            .map(|(a, b)| whole.slice(a..b))
            .collect();
        Self {
            whole,
            fields,
            revision,
        }
    }

    /// The answer holding the tools `keep` accepts (by index, in order).
    pub fn response(&self, mut keep: impl FnMut(usize) -> bool) -> ListToolsResponse {
        let kept: Vec<&Bytes> = (0..self.fields.len())
            .filter(|&i| keep(i))
            .map(|i| &self.fields[i])
            .collect();
        let encoded = if kept.len() == self.fields.len() {
            self.whole.clone()
        } else {
            let size = kept.iter().map(|f| f.len()).sum::<usize>() + 11;
            let mut encoded = BytesMut::with_capacity(size);
            for field in kept {
                encoded.put_slice(field);
            }
            if self.revision != 0 {
                uint64::encode(REVISION, &self.revision, &mut encoded);
            }
            encoded.freeze()
        };
        ListToolsResponse {
            tools: Vec::new(),
            revision: self.revision,
            encoded: Some(encoded),
        }
    }
}

impl Message for ListToolsResponse {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if let Some(encoded) = &self.encoded {
            buf.put_slice(encoded);
            return;
        }
        message::encode_repeated(TOOLS, &self.tools, buf);
        if self.revision != 0 {
            uint64::encode(REVISION, &self.revision, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match tag {
            TOOLS => message::merge_repeated(wire_type, &mut self.tools, buf, ctx),
            REVISION => uint64::merge(wire_type, &mut self.revision, buf, ctx),
            _ => skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        if let Some(encoded) = &self.encoded {
            return encoded.len();
        }
        let revision = if self.revision != 0 {
            uint64::encoded_len(REVISION, &self.revision)
        } else {
            0
        };
        message::encoded_len_repeated(TOOLS, &self.tools) + revision
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Param;

    fn tools() -> Vec<Tool> {
        (0..5)
            .map(|i| Tool {
                name: format!("tool_{i}"),
                description: "é".repeat(i * 40),
                input_schema_json: format!(r#"{{"type":"object","n":{i}}}"#),
                params: vec![Param {
                    name: "x".into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn the_encoded_answer_is_byte_for_byte_the_plain_one() {
        let tools = tools();
        let plain = ListToolsResponse {
            tools: tools.clone(),
            revision: 300,
            ..Default::default()
        };
        let cached = EncodedTools::new(&tools, 300).response(|_| true);
        assert_eq!(cached.encoded_len(), plain.encoded_len());
        assert_eq!(cached.encode_to_vec(), plain.encode_to_vec());
        let decoded = ListToolsResponse::decode(cached.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, plain);
    }

    #[test]
    fn a_filtered_answer_holds_only_the_kept_tools() {
        let tools = tools();
        let answer = EncodedTools::new(&tools, 0).response(|i| i % 2 == 1);
        let decoded = ListToolsResponse::decode(answer.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded.tools, vec![tools[1].clone(), tools[3].clone()]);
        assert_eq!(decoded.revision, 0);
    }
}
