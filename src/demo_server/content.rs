//! Media and content blocks served by the demo tools: a tiny PNG, a tiny WAV and one block of every
//! MCP content kind. Pure: no I/O, the bytes are constants or computed.

use base64::{Engine as _, engine::general_purpose::STANDARD as BASE64};
use rmcp::model::{ContentBlock, Icon, Resource, ResourceContents};

/// An 8x8 RGB PNG (teal with a dark X), made once with Python's zlib; it decodes with any PNG reader.
const TINY_PNG: [u8; 101] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x08, 0x08, 0x02, 0x00, 0x00, 0x00, 0x4b, 0x6d, 0x29,
    0xdc, 0x00, 0x00, 0x00, 0x2c, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0x90, 0xb7, 0x8a, 0xd7,
    0x9a, 0xdb, 0x8f, 0x86, 0x80, 0x82, 0x0c, 0x10, 0x0a, 0x4d, 0x14, 0x48, 0x32, 0x20, 0x73, 0x90,
    0x19, 0x0c, 0xc8, 0x0a, 0x91, 0xb5, 0x12, 0x92, 0xc0, 0x6e, 0x14, 0x76, 0xcb, 0x71, 0x39, 0x17,
    0x00, 0x76, 0x0b, 0x4b, 0xa1, 0xa0, 0x7e, 0xe9, 0xf3, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e,
    0x44, 0xae, 0x42, 0x60, 0x82,
];

/// WAV parameters: 8 kHz, mono, 8-bit unsigned PCM, 50 ms — the smallest sound players accept.
const WAV_SAMPLE_RATE: u32 = 8_000;
const WAV_SAMPLES: u32 = 400;
/// A 400 Hz square wave: 20 samples per period at 8 kHz.
const WAV_HALF_PERIOD: u32 = 10;

/// Bytes of the blob resource in `all_content`: arbitrary, including non-UTF-8 ones.
const BLOB_BYTES: [u8; 8] = [0x00, 0x01, 0x02, 0x03, 0xfd, 0xfe, 0xff, 0x42];

/// The tiny PNG image.
pub(super) fn tiny_png() -> &'static [u8] {
    &TINY_PNG
}

/// The tiny PNG as an icon (a `data:` URI): the demo's own, its `stats` tool's and its logo's.
pub(super) fn logo_icon() -> Icon {
    let mut icon = Icon::new(format!("data:image/png;base64,{}", BASE64.encode(TINY_PNG)));
    icon.mime_type = Some("image/png".into());
    icon.sizes = Some(vec!["8x8".into()]);
    icon
}

/// A 50 ms square-wave WAV file (RIFF header + 8-bit PCM samples).
pub(super) fn tiny_wav() -> Vec<u8> {
    let data_len = WAV_SAMPLES; // one byte per sample: mono, 8-bit
    let mut wav = Vec::with_capacity(44 + data_len as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data_len).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // channels
    wav.extend_from_slice(&WAV_SAMPLE_RATE.to_le_bytes());
    wav.extend_from_slice(&WAV_SAMPLE_RATE.to_le_bytes()); // byte rate = rate * 1 byte
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data_len.to_le_bytes());
    // 8-bit PCM is unsigned with silence at 128; a quiet wave keeps the sample polite.
    wav.extend((0..WAV_SAMPLES).map(|i| {
        if (i / WAV_HALF_PERIOD).is_multiple_of(2) {
            160u8
        } else {
            96u8
        }
    }));
    wav
}

/// The image block returned by `tiny_image`.
pub(super) fn png_block() -> ContentBlock {
    ContentBlock::image(BASE64.encode(tiny_png()), "image/png")
}

/// One block of every MCP content kind, in the order the MCP schema lists them.
pub(super) fn all_content_blocks() -> Vec<ContentBlock> {
    vec![
        ContentBlock::text(
            "this is a text block; the next blocks are image, audio, two embedded resources and a resource link",
        ),
        png_block(),
        ContentBlock::audio(BASE64.encode(tiny_wav()), "audio/wav"),
        ContentBlock::resource(ResourceContents::text(
            "hello from an embedded text resource",
            "demo://text",
        )),
        ContentBlock::resource(
            ResourceContents::blob(BASE64.encode(BLOB_BYTES), "demo://blob")
                .with_mime_type("application/octet-stream"),
        ),
        ContentBlock::resource_link(
            Resource::new("demo://linked", "linked")
                .with_description("a resource the client may fetch separately")
                .with_mime_type("text/plain"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bitwise CRC-32 (ISO-HDLC), as PNG chunks use; independent of how the PNG was made.
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    fn be32(bytes: &[u8]) -> u32 {
        u32::from_be_bytes(bytes[..4].try_into().unwrap())
    }

    /// Splits a PNG into (type, data) chunks, checking every CRC on the way.
    fn png_chunks(png: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut chunks = Vec::new();
        let mut rest = &png[8..];
        while !rest.is_empty() {
            let len = be32(rest) as usize;
            let kind_and_data = &rest[4..8 + len];
            assert_eq!(be32(&rest[8 + len..]), crc32(kind_and_data), "chunk crc");
            let kind = String::from_utf8(kind_and_data[..4].to_vec()).unwrap();
            chunks.push((kind, kind_and_data[4..].to_vec()));
            rest = &rest[12 + len..];
        }
        chunks
    }

    #[test]
    fn png_is_an_8x8_png_with_valid_chunks() {
        let png = tiny_png();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let chunks = png_chunks(png);
        let kinds: Vec<&str> = chunks.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kinds, ["IHDR", "IDAT", "IEND"]);
        let ihdr = &chunks[0].1;
        assert_eq!((be32(&ihdr[0..]), be32(&ihdr[4..])), (8, 8));
        // zlib header: deflate, and the check bits make the first two bytes a multiple of 31.
        let idat = &chunks[1].1;
        assert_eq!(idat[0] & 0x0f, 8);
        assert_eq!((u16::from(idat[0]) << 8 | u16::from(idat[1])) % 31, 0);
    }

    #[test]
    fn wav_header_matches_its_data() {
        let wav = tiny_wav();
        let le32 = |at: usize| u32::from_le_bytes(wav[at..at + 4].try_into().unwrap());
        let le16 = |at: usize| u16::from_le_bytes(wav[at..at + 2].try_into().unwrap());
        assert_eq!(&wav[0..4], b"RIFF");
        assert_eq!(le32(4) as usize, wav.len() - 8);
        assert_eq!(&wav[8..16], b"WAVEfmt ");
        assert_eq!((le16(20), le16(22), le32(24), le16(34)), (1, 1, 8_000, 8));
        assert_eq!(&wav[36..40], b"data");
        assert_eq!(le32(40) as usize, wav.len() - 44);
    }

    #[test]
    fn all_content_has_each_kind_once() {
        let kinds: Vec<String> = all_content_blocks()
            .iter()
            .map(|block| serde_json::to_value(block).unwrap()["type"].to_string())
            .collect();
        assert_eq!(
            kinds,
            [
                "\"text\"",
                "\"image\"",
                "\"audio\"",
                "\"resource\"",
                "\"resource\"",
                "\"resource_link\""
            ]
        );
    }

    #[test]
    fn image_block_is_base64_png() {
        let ContentBlock::Image(image) = png_block() else {
            panic!("not an image block");
        };
        assert_eq!(image.mime_type, "image/png");
        assert_eq!(BASE64.decode(image.data).unwrap(), tiny_png());
    }
}
