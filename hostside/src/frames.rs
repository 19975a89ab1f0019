//! Symbolized frames, interned: every distinct (function, file, line, module) is stored once and
//! stacks are lists of small ids, so a long recording's stacks stay cheap to hold and compare.

use std::collections::HashMap;

/// One symbolized frame. Inlined functions are frames of their own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Demangled function name, or `module+0xOFFSET` / `0xADDRESS` when unknown.
    pub function: String,
    /// Source file, when debug info said.
    pub file: Option<String>,
    /// Source line, when debug info said.
    pub line: Option<u32>,
    /// The module path on the board (`[kernel.kallsyms]` for the kernel).
    pub module: String,
    /// False when no symbol covered the address.
    pub symbolized: bool,
}

/// Id of a frame in a [`FrameTable`].
pub type FrameId = u32;

/// The interning table.
#[derive(Default)]
pub struct FrameTable {
    frames: Vec<Frame>,
    index: HashMap<Frame, FrameId>,
}

impl FrameTable {
    /// Returns the id of `frame`, adding it when new.
    pub fn intern(&mut self, frame: Frame) -> FrameId {
        if let Some(&id) = self.index.get(&frame) {
            return id;
        }
        let id = self.frames.len() as FrameId;
        self.frames.push(frame.clone());
        self.index.insert(frame, id);
        id
    }

    /// The frame behind an id.
    pub fn get(&self, id: FrameId) -> &Frame {
        &self.frames[id as usize]
    }
}
