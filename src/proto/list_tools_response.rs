//! `ListToolsResponse` with a second form: the bytes of an answer encoded once per catalog
//! revision, sent as they are. Generated code uses this type in place of prost's (an
//! `extern_path` in build.rs), so ListTools neither converts nor clones a tool per request: its
//! answer is a few slices of the cached encoding (the runs of tools the caller may see), which
//! the gRPC server sends without copying them (`grpc::pre_encoded`).
//!
//! **What would let it go**: tonic sending a message it is given already encoded (and prost
//! encoding a field from bytes it is given). It leans on protobuf's wire format only (a
//! repeated field is its entries side by side); its property test holds the cached answer, for
//! any tools, any subset kept and any tools re-encoded, byte for byte to prost's encoding.

use bytes::{BufMut, Bytes, BytesMut};
use prost::{
    DecodeError, Message,
    encoding::{
        DecodeContext, WireType, decode_key, decode_varint, encode_key, encode_varint, message,
        skip_field, uint64,
    },
};

use super::Tool;

/// `toolbroker.v1.ListToolsResponse`: the tools (sorted by name) and the catalog revision.
#[derive(Clone, PartialEq, Default, Debug)]
pub struct ListToolsResponse {
    /// The tools, sorted by name (empty when the answer was built pre-encoded).
    pub tools: Vec<Tool>,
    /// The catalog revision these tools belong to.
    pub revision: u64,
    /// When set, the encoded fields, written instead of `tools` and `revision`: slices of
    /// one cached encoding, in order.
    encoded: Option<Vec<Bytes>>,
}

impl ListToolsResponse {
    /// The encoded message in slices, when the answer was built pre-encoded.
    pub fn encoded_chunks(&self) -> Option<&[Bytes]> {
        self.encoded.as_deref()
    }
}

const TOOLS: u32 = 1;
const REVISION: u32 = 2;

/// A tool for [`EncodedTools::new`]: one to encode, or the field an earlier revision encoded.
pub enum ToolField<'a> {
    /// Encoded now.
    Encode(Tool),
    /// Copied as it is: [`EncodedTools::field`] of an earlier revision.
    Encoded(&'a [u8]),
}

/// Every tool of one revision, each encoded as its `tools` field (key, length, message), and
/// the whole answer that holds them all.
#[derive(Debug, Default)]
pub struct EncodedTools {
    /// The answer with every tool and the revision: sent as it is to callers who see all.
    whole: Bytes,
    /// Where each tool's field ends in `whole` (it starts where the one before ends); the
    /// revision field, if any, follows the last.
    ends: Vec<usize>,
    revision: u64,
}

impl EncodedTools {
    /// Encodes each new tool once and copies those already encoded (taking them one by one,
    /// so that they need not all be held).
    pub fn new<'a>(tools: impl ExactSizeIterator<Item = ToolField<'a>>, revision: u64) -> Self {
        let mut whole = BytesMut::new();
        let mut ends = Vec::with_capacity(tools.len());
        for tool in tools {
            match tool {
                ToolField::Encode(tool) => {
                    encode_key(TOOLS, WireType::LengthDelimited, &mut whole);
                    encode_varint(tool.encoded_len() as u64, &mut whole);
                    tool.encode_raw(&mut whole);
                }
                ToolField::Encoded(field) => whole.extend_from_slice(field),
            }
            ends.push(whole.len());
        }
        if revision != 0 {
            uint64::encode(REVISION, &revision, &mut whole);
        }
        // Grown by doubling: keep only what is used, for as long as the revision lasts.
        let whole = if whole.capacity() - whole.len() > whole.len() / 8 {
            Bytes::copy_from_slice(&whole)
        } else {
            whole.freeze()
        };
        Self {
            whole,
            ends,
            revision,
        }
    }

    /// The whole answer's bytes: every tool, then the revision.
    pub fn bytes(&self) -> &[u8] {
        &self.whole
    }

    /// The `tools` field of the tool at position `i` (key, length, message).
    pub fn field(&self, i: usize) -> &[u8] {
        &self.whole[self.field_range(i)]
    }

    /// Where the `tools` field of the tool at position `i` lies in the whole answer.
    fn field_range(&self, i: usize) -> std::ops::Range<usize> {
        let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
        start..self.ends[i]
    }

    /// The tool at position `i`, decoded from its encoding.
    pub fn tool(&self, i: usize) -> Tool {
        self.decode(i)
    }

    /// The names and descriptions of the parameters of the tool at position `i`, decoded
    /// from its encoding (the rest of the tool skipped).
    pub fn param_texts(&self, i: usize) -> Vec<(String, String)> {
        let tool: ParamTexts = self.decode(i);
        tool.params
            .into_iter()
            .map(|param| (param.name, param.description))
            .collect()
    }

    /// The input schema's text of the tool at position `i`: a slice of the encoding, not a
    /// copy (so that its spec can hold it there rather than in a buffer of its own).
    pub fn input_schema_json(&self, i: usize) -> Bytes {
        let tool: SchemaText = self.decode(i);
        tool.input_schema_json
    }

    /// The message of the tool at position `i`, decoded as `M` (its `bytes` fields slices of
    /// the encoding).
    fn decode<M: Message + Default>(&self, i: usize) -> M {
        let mut field = self.whole.slice(self.field_range(i));
        let decoded = decode_key(&mut field)
            .and_then(|_| decode_varint(&mut field))
            .and_then(|_| M::decode(field));
        decoded.expect("the field was encoded from a Tool")
    }

    /// The answer holding the tools `keep` accepts (by index, in order): slices of the
    /// cached encoding, one per run of kept tools, never a copy.
    pub fn response(&self, mut keep: impl FnMut(usize) -> bool) -> ListToolsResponse {
        let mut runs = Runs::default();
        let mut start = 0;
        for (i, &end) in self.ends.iter().enumerate() {
            if keep(i) {
                runs.add(start, end);
            }
            start = end;
        }
        // The revision field.
        runs.add(start, self.whole.len());
        ListToolsResponse {
            tools: Vec::new(),
            revision: self.revision,
            encoded: Some(runs.slices(&self.whole)),
        }
    }
}

/// A `Tool` read for its parameters' names and descriptions only.
#[derive(Clone, PartialEq, prost::Message)]
struct ParamTexts {
    #[prost(message, repeated, tag = "3")]
    params: Vec<ParamText>,
}

/// A `Tool` read for its input schema's text only, as bytes of the encoding.
#[derive(Clone, PartialEq, prost::Message)]
struct SchemaText {
    #[prost(bytes = "bytes", tag = "4")]
    input_schema_json: Bytes,
}

/// A `Param` read for its name and description only.
#[derive(Clone, PartialEq, prost::Message)]
struct ParamText {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "3")]
    description: String,
}

/// Byte ranges, those that touch merged.
#[derive(Default)]
struct Runs(Vec<(usize, usize)>);

impl Runs {
    fn add(&mut self, start: usize, end: usize) {
        if start == end {
            return;
        }
        match self.0.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => self.0.push((start, end)),
        }
    }

    fn slices(self, whole: &Bytes) -> Vec<Bytes> {
        self.0.into_iter().map(|(a, b)| whole.slice(a..b)).collect()
    }
}

impl Message for ListToolsResponse {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if let Some(encoded) = &self.encoded {
            for chunk in encoded {
                buf.put_slice(chunk);
            }
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
            return encoded.iter().map(Bytes::len).sum();
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

    fn fields(tools: &[Tool]) -> impl ExactSizeIterator<Item = ToolField<'static>> {
        tools.to_vec().into_iter().map(ToolField::Encode)
    }

    #[test]
    fn fields_of_an_earlier_encoding_are_copied_as_they_are() {
        let tools = tools();
        let earlier = EncodedTools::new(fields(&tools), 1);
        let mut changed = tools.clone();
        changed[2].description = "new words".into();
        // Tools 0, 1, 3 and 4 come from the earlier encoding, tool 2 is encoded anew.
        let later = EncodedTools::new(
            (0..5).map(|i| match i {
                2 => ToolField::Encode(changed[2].clone()),
                i => ToolField::Encoded(earlier.field(i)),
            }),
            2,
        );
        let fresh = EncodedTools::new(fields(&changed), 2);
        assert_eq!(later.whole, fresh.whole);
        assert_eq!(later.tool(2).description, "new words");
    }

    #[test]
    fn parameter_texts_are_read_from_the_encoding() {
        let mut tools = tools();
        tools[1].params = vec![
            Param {
                name: "path".into(),
                description: "Where the file is".into(),
                r#type: "string".into(),
                properties: vec![Param {
                    name: "inner".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            Param {
                name: "mode".into(),
                ..Default::default()
            },
        ];
        let encoded = EncodedTools::new(fields(&tools), 1);
        assert_eq!(
            encoded.param_texts(1),
            [
                ("path".to_owned(), "Where the file is".to_owned()),
                ("mode".to_owned(), String::new())
            ]
        );
        assert_eq!(encoded.param_texts(0), [("x".to_owned(), String::new())]);
    }

    #[test]
    fn a_schema_text_is_a_slice_of_the_encoding() {
        let tools = tools();
        let encoded = EncodedTools::new(fields(&tools), 1);
        for (i, tool) in tools.iter().enumerate() {
            let text = encoded.input_schema_json(i);
            assert_eq!(text, tool.input_schema_json.as_bytes());
            let field = encoded.field(i).as_ptr_range();
            assert!(field.contains(&text.as_ptr()), "tool {i}'s text was copied");
        }
    }

    #[test]
    fn the_encoded_answer_is_byte_for_byte_the_plain_one() {
        let tools = tools();
        let plain = ListToolsResponse {
            tools: tools.clone(),
            revision: 300,
            ..Default::default()
        };
        let cached = EncodedTools::new(fields(&tools), 300).response(|_| true);
        assert_eq!(cached.encoded_len(), plain.encoded_len());
        assert_eq!(cached.encode_to_vec(), plain.encode_to_vec());
        let decoded = ListToolsResponse::decode(cached.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, plain);
    }

    #[test]
    fn a_filtered_answer_holds_only_the_kept_tools() {
        let tools = tools();
        let answer = EncodedTools::new(fields(&tools), 0).response(|i| i % 2 == 1);
        let decoded = ListToolsResponse::decode(answer.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded.tools, vec![tools[1].clone(), tools[3].clone()]);
        assert_eq!(decoded.revision, 0);
    }

    #[test]
    fn kept_tools_side_by_side_are_one_slice_of_the_cache() {
        let tools = tools();
        let cache = EncodedTools::new(fields(&tools), 7);
        let answer = cache.response(|i| i != 2);
        // Tools 0–1, then 3–4 with the revision after them.
        assert_eq!(answer.encoded_chunks().unwrap().len(), 2);
        let decoded = ListToolsResponse::decode(answer.encode_to_vec().as_slice()).unwrap();
        let names: Vec<_> = decoded.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["tool_0", "tool_1", "tool_3", "tool_4"]);
        assert_eq!(decoded.revision, 7);
        let everything = cache.response(|_| true);
        let whole = &everything.encoded_chunks().unwrap()[0];
        assert_eq!(everything.encoded_chunks().unwrap().len(), 1);
        assert_eq!(whole.as_ptr(), cache.whole.as_ptr(), "not a copy");
        assert_eq!(cache.tool(0), tools[0]);
        assert_eq!(cache.tool(4), tools[4]);
        let none = cache.response(|_| false);
        let decoded = ListToolsResponse::decode(none.encode_to_vec().as_slice()).unwrap();
        assert!(decoded.tools.is_empty());
        assert_eq!(decoded.revision, 7);
    }

    /// A tool of any texts and any number of parameters (nested once).
    fn any_tool() -> impl proptest::strategy::Strategy<Value = Tool> {
        use proptest::prelude::*;
        let param =
            ("\\PC{0,8}", "\\PC{0,12}", any::<bool>()).prop_map(|(name, description, required)| {
                Param {
                    name,
                    description,
                    required,
                    ..Default::default()
                }
            });
        (
            "\\PC{0,12}",
            "\\PC{0,60}",
            "\\PC{0,40}",
            proptest::collection::vec(param.clone(), 0..4),
            proptest::collection::vec(param, 0..2),
        )
            .prop_map(|(name, description, schema, mut params, inner)| {
                if let Some(first) = params.first_mut() {
                    first.properties = inner;
                }
                Tool {
                    name,
                    description,
                    input_schema_json: schema,
                    params,
                    ..Default::default()
                }
            })
    }

    proptest::proptest! {
        /// The cached encoding against prost's own: for any tools, any subset kept and any
        /// tools re-encoded in a later revision, the answer decodes to what prost encodes for
        /// the same tools, byte for byte, and each tool and schema text reads back.
        #[test]
        fn any_answer_is_what_prost_encodes(
            tools in proptest::collection::vec(any_tool(), 0..10),
            keep in proptest::collection::vec(proptest::bool::ANY, 10),
            renew in proptest::collection::vec(proptest::bool::ANY, 10),
            revision in proptest::num::u64::ANY,
        ) {
            let earlier = EncodedTools::new(fields(&tools), revision.wrapping_sub(1));
            let cache = EncodedTools::new(
                (0..tools.len()).map(|i| if renew[i] {
                    ToolField::Encode(tools[i].clone())
                } else {
                    ToolField::Encoded(earlier.field(i))
                }),
                revision,
            );
            for (i, tool) in tools.iter().enumerate() {
                proptest::prop_assert_eq!(&cache.tool(i), tool);
                proptest::prop_assert_eq!(&cache.input_schema_json(i)[..], tool.input_schema_json.as_bytes());
            }
            let answer = cache.response(|i| keep[i]);
            let plain = ListToolsResponse {
                tools: tools.iter().enumerate().filter(|(i, _)| keep[*i]).map(|(_, t)| t.clone()).collect(),
                revision,
                ..Default::default()
            };
            proptest::prop_assert_eq!(answer.encoded_len(), plain.encoded_len());
            proptest::prop_assert_eq!(answer.encode_to_vec(), plain.encode_to_vec());
        }
    }
}
