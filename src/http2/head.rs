//! Where a client's first HTTP/2 request head ends, read from the bytes it sends: the
//! connection preface, then frames (their 9-byte headers only; payloads are skipped, never
//! decoded) until a HEADERS frame, with its CONTINUATIONs, ends with END_HEADERS. Pure: bytes
//! in, an answer out, a few bytes of state between reads.
//!
//! It would go if h2 (or hyper's HTTP/2 server) bounded the time to a first request head, as
//! hyper's HTTP/1 server does with `header_read_timeout`.

use crate::http2::frame::{
    CONTINUATION, END_HEADERS, Frame, HEAD as FRAME_HEADER_LEN, HEADERS, PREFACE,
};

/// Reads a connection's first bytes until its first request head is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadScan {
    state: State,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// This many bytes of the preface have come.
    Preface(usize),
    /// Part of a frame header has come; `continued`: a header block is open (a HEADERS
    /// without END_HEADERS came), so it ends with a CONTINUATION's END_HEADERS.
    FrameHeader {
        bytes: [u8; FRAME_HEADER_LEN],
        have: usize,
        continued: bool,
    },
    /// A frame's payload: `left` bytes to skip; `ends_head` if the head is complete after it.
    Payload {
        left: u32,
        ends_head: bool,
        continued: bool,
    },
    /// The head is complete.
    Complete,
    /// Not HTTP/2: no head will ever be complete (h2 refuses the connection, or the deadline
    /// closes it).
    NotHttp2,
}

impl HeadScan {
    /// Nothing read yet.
    pub fn new() -> Self {
        Self {
            state: State::Preface(0),
        }
    }

    /// Whether the first request head is complete.
    pub fn is_complete(&self) -> bool {
        self.state == State::Complete
    }

    /// Reads the next bytes the client sent; whether its first request head is complete.
    /// Bytes after that are not looked at.
    pub fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() {
            let used = match &mut self.state {
                State::Preface(matched) => preface(matched, bytes).unwrap_or_else(|| {
                    self.state = State::NotHttp2;
                    bytes.len()
                }),
                State::FrameHeader { .. } => self.frame_header(bytes),
                State::Payload { .. } => self.payload(bytes),
                State::Complete | State::NotHttp2 => bytes.len(),
            };
            bytes = &bytes[used..];
            if let State::Preface(PREFACE_LEN) = self.state {
                self.state = State::FrameHeader {
                    bytes: [0; FRAME_HEADER_LEN],
                    have: 0,
                    continued: false,
                };
            }
            // A frame with no payload ends at its header.
            if let State::Payload { left: 0, .. } = self.state {
                self.payload(&[]);
            }
        }
        self.is_complete()
    }

    fn frame_header(&mut self, bytes: &[u8]) -> usize {
        let State::FrameHeader {
            bytes: header,
            have,
            continued,
        } = &mut self.state
        else {
            return 0;
        };
        let take = bytes.len().min(FRAME_HEADER_LEN - *have);
        header[*have..*have + take].copy_from_slice(&bytes[..take]);
        *have += take;
        if *have == FRAME_HEADER_LEN {
            let Frame {
                len, kind, flags, ..
            } = Frame::head(&header[..]).expect("a whole frame header");
            let left = u32::try_from(len).expect("24 bits");
            let in_block = kind == HEADERS || (*continued && kind == CONTINUATION);
            let ends = flags & END_HEADERS != 0;
            self.state = State::Payload {
                left,
                ends_head: in_block && ends,
                continued: (in_block && !ends) || (*continued && !in_block),
            };
        }
        take
    }

    fn payload(&mut self, bytes: &[u8]) -> usize {
        let State::Payload {
            left,
            ends_head,
            continued,
        } = &mut self.state
        else {
            return 0;
        };
        let take = bytes.len().min(*left as usize);
        *left -= take as u32;
        if *left == 0 {
            self.state = if *ends_head {
                State::Complete
            } else {
                State::FrameHeader {
                    bytes: [0; FRAME_HEADER_LEN],
                    have: 0,
                    continued: *continued,
                }
            };
        }
        take
    }
}

const PREFACE_LEN: usize = PREFACE.len();

/// Matches `bytes` against the rest of the preface; how many it used, or `None` if they differ.
fn preface(matched: &mut usize, bytes: &[u8]) -> Option<usize> {
    let take = bytes.len().min(PREFACE_LEN - *matched);
    if bytes[..take] != PREFACE[*matched..*matched + take] {
        return None;
    }
    *matched += take;
    Some(take)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn frame(kind: u8, flags: u8, payload_len: usize) -> Vec<u8> {
        let len = (payload_len as u32).to_be_bytes();
        let mut frame = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 1];
        frame.resize(FRAME_HEADER_LEN + payload_len, 0xAB);
        frame
    }

    fn settings() -> Vec<u8> {
        frame(0x4, 0, 6)
    }

    /// The offset after which the scan says complete, feeding one byte at a time.
    fn completes_at(bytes: &[u8]) -> Option<usize> {
        let mut scan = HeadScan::new();
        (0..bytes.len())
            .find(|&i| scan.feed(&bytes[i..=i]))
            .map(|i| i + 1)
    }

    #[test]
    fn the_head_ends_with_the_last_byte_of_its_end_headers_frame() {
        // What is sent (frame by frame), and where the head is complete.
        type Case = (&'static str, Vec<Vec<u8>>, Option<usize>);
        let cases: Vec<Case> = vec![
            ("nothing but the preface", vec![PREFACE.to_vec()], None),
            ("half the preface", vec![PREFACE[..12].to_vec()], None),
            (
                "settings, then headers with END_HEADERS",
                vec![
                    PREFACE.to_vec(),
                    settings(),
                    frame(HEADERS, END_HEADERS | 0x1, 30),
                ],
                Some(24 + 15 + 39),
            ),
            (
                "headers without END_HEADERS, never continued",
                vec![PREFACE.to_vec(), frame(HEADERS, 0, 30)],
                None,
            ),
            (
                "headers, then the continuation that ends them",
                vec![
                    PREFACE.to_vec(),
                    frame(HEADERS, 0, 10),
                    frame(CONTINUATION, 0, 5),
                    frame(CONTINUATION, END_HEADERS, 0),
                ],
                Some(24 + 19 + 14 + 9),
            ),
            (
                "a continuation outside a header block ends nothing",
                vec![PREFACE.to_vec(), frame(CONTINUATION, END_HEADERS, 4)],
                None,
            ),
            (
                "pings and window updates are not a head",
                vec![
                    PREFACE.to_vec(),
                    frame(0x6, 0, 8),
                    frame(0x8, 0, 4),
                    frame(0x6, 0, 8),
                ],
                None,
            ),
            (
                "an empty header block",
                vec![PREFACE.to_vec(), frame(HEADERS, END_HEADERS, 0)],
                Some(24 + 9),
            ),
            (
                "HTTP/1.1 is not a head here",
                vec![b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()],
                None,
            ),
        ];
        for (what, frames, want) in cases {
            let bytes = frames.concat();
            assert_eq!(completes_at(&bytes), want, "{what}");
            let mut whole = HeadScan::new();
            assert_eq!(whole.feed(&bytes), want.is_some(), "{what}, at once");
        }
    }

    #[test]
    fn a_large_declared_payload_is_skipped_not_held() {
        let mut scan = HeadScan::new();
        let mut bytes = PREFACE.to_vec();
        bytes.extend_from_slice(&frame(0x0, 0, 0)[..FRAME_HEADER_LEN]);
        bytes[24..27].copy_from_slice(&[0xFF, 0xFF, 0xFF]);
        assert!(!scan.feed(&bytes));
        assert!(!scan.feed(&vec![0; 1 << 20]));
        assert!(std::mem::size_of::<HeadScan>() <= 32);
    }

    fn any_frame() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::sample::select(vec![0x0u8, 0x1, 0x3, 0x4, 0x6, 0x8, 0x9]),
            any::<u8>(),
            0usize..40,
        )
            .prop_map(|(kind, flags, len)| frame(kind, flags, len))
    }

    proptest! {
        /// However the bytes are cut into reads, the answer is the same.
        #[test]
        fn reads_cut_anywhere_give_the_same_answer(
            frames in prop::collection::vec(any_frame(), 0..8),
            cuts in prop::collection::vec(1usize..50, 1..20),
        ) {
            let bytes = [PREFACE.to_vec(), frames.concat()].concat();
            let want = completes_at(&bytes);
            let mut scan = HeadScan::new();
            let mut done_at = None;
            let mut at = 0;
            for cut in cuts.iter().cycle() {
                if at >= bytes.len() {
                    break;
                }
                let end = (at + cut).min(bytes.len());
                if scan.feed(&bytes[at..end]) && done_at.is_none() {
                    done_at = Some(end);
                }
                at = end;
            }
            prop_assert_eq!(done_at.is_some(), want.is_some());
            if let (Some(done), Some(want)) = (done_at, want) {
                // Complete within the read that held the head's last byte.
                prop_assert!(done >= want);
            }
        }

        /// The head is complete exactly after the first header block ends.
        #[test]
        fn the_first_header_block_completes_the_head(
            before in prop::collection::vec(
                (prop::sample::select(vec![0x0u8, 0x3, 0x4, 0x6, 0x8]), 0usize..20)
                    .prop_map(|(kind, len)| frame(kind, END_HEADERS, len)),
                0..5,
            ),
            continuations in 0usize..4,
            len in 0usize..30,
        ) {
            let mut block = vec![frame(HEADERS, if continuations == 0 { END_HEADERS } else { 0 }, len)];
            for i in 0..continuations {
                let last = i + 1 == continuations;
                block.push(frame(CONTINUATION, if last { END_HEADERS } else { 0 }, len));
            }
            let head = [PREFACE.to_vec(), before.concat(), block.concat()].concat();
            prop_assert_eq!(completes_at(&head), Some(head.len()));
        }
    }
}
