use std::fmt;

/// What is wrong with an input value; becomes `InvalidInput.problem` in Python.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    WrongType,
    Empty,
    OutOfRange,
    UnknownValue,
    NotUtf8,
    NotAllowed,
    Duplicate,
}

impl Problem {
    pub fn as_str(self) -> &'static str {
        match self {
            Problem::WrongType => "wrong-type",
            Problem::Empty => "empty",
            Problem::OutOfRange => "out-of-range",
            Problem::UnknownValue => "unknown-value",
            Problem::NotUtf8 => "not-utf8",
            Problem::NotAllowed => "not-allowed",
            Problem::Duplicate => "duplicate",
        }
    }
}

/// Every error the core can report. Messages name fields and IDs, never bodies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoreError {
    InvalidInput {
        field: &'static str,
        problem: Problem,
        message: String,
    },
    /// Two turns of one conversation share an ID.
    DuplicateId { id: String },
}

impl CoreError {
    pub fn invalid(field: &'static str, problem: Problem, message: impl Into<String>) -> Self {
        CoreError::InvalidInput {
            field,
            problem,
            message: message.into(),
        }
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::InvalidInput { field, message, .. } => write!(f, "{field}: {message}"),
            CoreError::DuplicateId { id } => write!(f, "id: duplicate turn id {id:?}"),
        }
    }
}

impl std::error::Error for CoreError {}
