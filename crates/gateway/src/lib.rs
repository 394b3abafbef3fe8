//! `gateway`: event loops that own sockets.
