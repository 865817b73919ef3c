//! `lograil::frame::read_frame` over arbitrary bytes, read in arbitrary pieces, with a small
//! maximum frame size.
//!
//! Input: `[max selector][read pattern seed][stream...]`. Frames are read until the stream ends
//! or a frame is refused, and each result is compared with a model of the framing (a big-endian
//! i32 length, 8 ≤ length ≤ max, then that many bytes). Checked: no panic; the same frames and
//! the same errors as the model; no byte read past a frame; no allocation larger than the
//! maximum frame size while reading.

#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use lograil::frame::{read_frame, FrameError};
use tokio::io::{AsyncRead, ReadBuf};

/// The system allocator, recording the largest single allocation.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// Hands out the stream in pieces of 1..=16 bytes chosen by a seed, now and then answering
/// `Pending` first (and waking at once), as a socket does.
struct Pieces<'a> {
    data: &'a [u8],
    pos: usize,
    state: u32,
}

impl Pieces<'_> {
    fn next_random(&mut self) -> u32 {
        // xorshift32: cheap and deterministic for a given seed.
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.state = x;
        x
    }
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let r = self.next_random();
        if r.is_multiple_of(5) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let piece = 1 + (r >> 8) as usize % 16;
        let n = piece.min(buf.remaining()).min(self.data.len() - self.pos);
        let start = self.pos;
        buf.put_slice(&self.data[start..start + n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}

/// Polls `future` to completion; the reader wakes itself whenever it is pending.
fn run<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// What the framing says the next read gives: `Ok(None)` at a clean end, the frame, or an
/// error, with how many bytes it consumes.
#[derive(Debug, PartialEq)]
enum Expected<'a> {
    End,
    Frame(&'a [u8]),
    TooLarge,
    TooSmall,
    Truncated,
}

fn model(rest: &[u8], max: usize) -> Expected<'_> {
    if rest.is_empty() {
        return Expected::End;
    }
    let Some((prefix, body)) = rest.split_first_chunk::<4>() else {
        return Expected::Truncated;
    };
    let size = i32::from_be_bytes(*prefix);
    if i64::from(size) > max as i64 {
        return Expected::TooLarge;
    }
    if size < 8 {
        return Expected::TooSmall;
    }
    match body.get(..size as usize) {
        Some(frame) => Expected::Frame(frame),
        None => Expected::Truncated,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(([max_selector, seed], stream)) = data.split_first_chunk::<2>() else {
        return;
    };
    let max = 8 + usize::from(*max_selector) * 4;
    let mut reader = Pieces {
        data: stream,
        pos: 0,
        state: 0x9E37_79B9 ^ u32::from(*seed),
    };
    loop {
        let at = reader.pos;
        let expected = model(&stream[at..], max);
        LARGEST.store(0, Ordering::Relaxed);
        let got = run(read_frame(&mut reader, max));
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(
            largest <= max,
            "allocated {largest} bytes reading a frame of at most {max}"
        );
        match (&expected, got) {
            (Expected::End, Ok(None)) => return,
            (Expected::Frame(frame), Ok(Some(got))) => {
                assert_eq!(&got[..], *frame, "frame at byte {at}");
                assert_eq!(
                    reader.pos,
                    at + 4 + frame.len(),
                    "read past the frame at {at}"
                );
            }
            (Expected::TooLarge, Err(FrameError::TooLarge { .. }))
            | (Expected::TooSmall, Err(FrameError::TooSmall(_)))
            | (Expected::Truncated, Err(FrameError::Truncated)) => return,
            (expected, got) => panic!("at byte {at}: expected {expected:?}, got {got:?}"),
        }
    }
});
