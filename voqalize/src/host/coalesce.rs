//! [`Coalesced`]: a socket whose writes wait for a flush, so a turn's frames leave in one `write`
//! (docs/protocol.md §3).
//!
//! The session's writer hands the WebSocket every frame that is ready, then flushes once. The
//! WebSocket library writes each frame to its stream as it comes; this stream keeps those bytes
//! until the flush and sends them with one system call. On loopback or a LAN a `write` costs more CPU than
//! encoding a frame, and a turn is a dozen small frames.
//!
//! The buffer is allocated when a batch starts and freed when it is written, so a quiet call holds
//! none of it; it never holds more than [`MAX_BATCH_BYTES`] (past that, writes go through).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most bytes a batch holds before it is written without waiting for the flush.
pub(super) const MAX_BATCH_BYTES: usize = 16 * 1024;

/// The buffer a batch starts with.
const BATCH_START_BYTES: usize = 1024;

/// A stream whose writes are kept until [`AsyncWrite::poll_flush`] once [`Coalesced::batch`] is
/// on; reads pass through.
#[derive(Debug)]
pub(crate) struct Coalesced<S> {
    inner: S,
    pending: Vec<u8>,
    batching: bool,
}

impl<S> Coalesced<S> {
    /// Wraps `inner`; writes pass straight through until [`Coalesced::batch`] turns batching on
    /// (the WebSocket handshake expects its answer written at once).
    pub(crate) fn new(inner: S) -> Self {
        Coalesced {
            inner,
            pending: Vec::new(),
            batching: false,
        }
    }

    /// From now on, writes wait for the next flush.
    pub(crate) fn batch(&mut self) {
        self.batching = true;
    }
}

impl<S: AsyncWrite + Unpin> Coalesced<S> {
    /// Writes what is pending; frees the buffer once it is all written.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pending.drain(..n);
        }
        self.pending = Vec::new();
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Coalesced<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Coalesced<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if !this.batching {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        if this.pending.len() + buf.len() > MAX_BATCH_BYTES {
            ready!(this.poll_drain(cx))?;
            if buf.len() > MAX_BATCH_BYTES {
                return Pin::new(&mut this.inner).poll_write(cx, buf);
            }
        }
        if this.pending.capacity() == 0 {
            // One allocation a batch, not one per doubling: a turn is under a kilobyte or so.
            this.pending.reserve(buf.len().max(BATCH_START_BYTES));
        }
        this.pending.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn writes_wait_for_the_flush_once_batching() {
        let (near, mut far) = tokio::io::duplex(64 * 1024);
        let mut s = Coalesced::new(near);
        s.write_all(b"handshake").await.unwrap();
        let mut got = [0u8; 9];
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"handshake", "before batching, writes pass through");

        s.batch();
        s.write_all(b"one ").await.unwrap();
        s.write_all(b"two").await.unwrap();
        assert_eq!(s.pending.len(), 7, "kept until the flush");
        s.flush().await.unwrap();
        assert_eq!(s.pending.capacity(), 0, "the buffer is freed once written");
        let mut got = [0u8; 7];
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"one two");
    }

    #[tokio::test]
    async fn a_batch_never_holds_more_than_its_bound() {
        let (near, mut far) = tokio::io::duplex(4 * MAX_BATCH_BYTES);
        let mut s = Coalesced::new(near);
        s.batch();
        let block = vec![7u8; MAX_BATCH_BYTES / 2 + 1];
        s.write_all(&block).await.unwrap();
        s.write_all(&block).await.unwrap();
        assert!(s.pending.len() <= MAX_BATCH_BYTES);
        let big = vec![9u8; MAX_BATCH_BYTES + 1];
        s.write_all(&big).await.unwrap();
        assert!(s.pending.len() <= MAX_BATCH_BYTES);
        s.flush().await.unwrap();
        let mut got = vec![0u8; 2 * block.len() + big.len()];
        far.read_exact(&mut got).await.unwrap();
        assert!(got[..2 * block.len()].iter().all(|b| *b == 7));
        assert!(got[2 * block.len()..].iter().all(|b| *b == 9));
    }
}
