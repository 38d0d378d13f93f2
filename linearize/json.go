package linearize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The JSON history format, read by DecodeHistory and written by
// EncodeHistory:
//
//	{
//	  "operations": [
//	    {"id": 1, "client": 0, "call": 100, "return": 250,
//	     "input": {"lock": "L", "op": "acquire", "owner": 7},
//	     "output": {"ok": true, "token": 1}},
//	    {"id": 2, "client": 1, "call": 120, "return": 900, "unknown": true,
//	     "input": {"lock": "L", "op": "release", "owner": 9}}
//	  ]
//	}
//
// The document is one object with the member "operations", an array
// (possibly empty) of operation objects (and, in a history file, "version"
// and "model": see file.go), which have exactly these members:
//
//   - "id": integer, unique in the history (Operation.ID);
//   - "client": integer >= 0 (Operation.ClientID);
//   - "call", "return": integers, return >= call (Operation.Call and
//     Operation.Return; nanoseconds by convention);
//   - "input": the input, a JSON value decoded into I (required);
//   - "output": the output, decoded into O: required, unless "unknown" is
//     true, and then it must be absent or null;
//   - "unknown": optional boolean, default false (Operation.Unknown).
//
// Any other member, at any level of nesting decoded by encoding/json
// (inputs and outputs included), is an error, as is a missing member, a
// value of the wrong type (a string for a number, 1.5 for an integer), an
// integer out of int64's range, or anything after the document. Members of
// inputs and outputs that are absent take Go's zero values; an input or
// output type with a method Validate() error is checked with it after
// decoding (the models' inputs reject an unknown or missing "op").

// jsonHistory and jsonOperation are the wire form; pointers and raw
// messages tell a missing member from a zero one.
type jsonHistory struct {
	Version    *int               `json:"version"`
	Model      json.RawMessage    `json:"model"`
	Operations *[]json.RawMessage `json:"operations"`
}

type jsonOperation struct {
	ID      *int            `json:"id"`
	Client  *int            `json:"client"`
	Call    *int64          `json:"call"`
	Return  *int64          `json:"return"`
	Input   json.RawMessage `json:"input"`
	Output  json.RawMessage `json:"output"`
	Unknown *bool           `json:"unknown"`
}

// validator is implemented by inputs and outputs that can check
// themselves.
type validator interface{ Validate() error }

// DecodeHistory reads one JSON history (format above) from r. It returns
// an error wrapping ErrDecode for any deviation from the format, and never
// a partial history: a syntax error says its line and column, a bad
// operation its index, line and column and the member at fault.
//
// It also reads a history file (see File), whose model it checks and
// leaves out; ReadFile returns it.
func DecodeHistory[I, O any](r io.Reader) ([]Operation[I, O], error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, decodeError(err)
	}
	return decodeHistory[I, O](data)
}

// atOffset prefixes err with its line and column in data when it is an
// *offsetError.
func atOffset(data []byte, err error) error {
	var oe *offsetError
	if errors.As(err, &oe) {
		return fmt.Errorf("%s: %w", position(data, oe.off), err)
	}
	return err
}

func decodeHistory[I, O any](data []byte) ([]Operation[I, O], error) {
	var doc jsonHistory
	if err := strictUnmarshal(data, &doc); err != nil {
		return nil, decodeError(atOffset(data, err))
	}
	if _, err := fileHeader(data, &doc); err != nil {
		return nil, decodeError(err)
	}
	if doc.Operations == nil {
		return nil, decodeError(errors.New(`missing "operations"`))
	}
	h := make([]Operation[I, O], 0, len(*doc.Operations))
	cursor := 0
	for i, raw := range *doc.Operations {
		// raw is the operation's text as it stands in data, and only
		// white space and a comma separate it from the one before.
		var where []string // the operation's id, if it has one, and position
		op, err := decodeOperation[I, O](raw)
		if err == nil {
			where = append(where, fmt.Sprintf("id %d", op.ID))
			if fault := operationFault(&op); fault != "" {
				err = fmt.Errorf("%w: %s", ErrInvalidHistory, fault)
			}
		}
		at := -1 // the operation's offset in data
		if k := bytes.Index(data[cursor:], raw); k >= 0 {
			at = cursor + k
			cursor += k + len(raw)
		}
		if err != nil && at >= 0 {
			// Only now: position counts lines from the start of data.
			where = append(where, position(data, int64(at)))
		}
		if err != nil && len(where) == 0 {
			return nil, decodeError(fmt.Errorf("operation %d: %w", i, err))
		}
		if err != nil {
			return nil, decodeError(fmt.Errorf("operation %d (%s): %w", i, strings.Join(where, ", "), err))
		}
		h = append(h, op)
	}
	if err := validateHistory(h); err != nil {
		return nil, decodeError(err)
	}
	return h, nil
}

// decodeError wraps err in ErrDecode with "linearize: " said once, however
// many of the package's errors err wraps.
func decodeError(err error) error {
	return &wrapped{msg: ErrDecode.Error() + ": " + strings.ReplaceAll(err.Error(), "linearize: ", ""),
		errs: []error{ErrDecode, err}}
}

// position names byte offset off of data as "line L, column C", both
// counted from 1, columns in characters.
func position(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := 1 + bytes.Count(before, []byte("\n"))
	col := 1 + utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return fmt.Sprintf("line %d, column %d", line, col)
}

// offsetError is a decoding error at a byte offset of the input.
type offsetError struct {
	off int64
	err error
}

func (e *offsetError) Error() string { return e.err.Error() }
func (e *offsetError) Unwrap() error { return e.err }

func decodeOperation[I, O any](raw json.RawMessage) (Operation[I, O], error) {
	var op Operation[I, O]
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return op, errors.New("null instead of an object")
	}
	var j jsonOperation
	if err := strictUnmarshal(raw, &j); err != nil {
		return op, err
	}
	switch {
	case j.ID == nil:
		return op, errors.New(`missing "id"`)
	case j.Client == nil:
		return op, errors.New(`missing "client"`)
	case j.Call == nil:
		return op, errors.New(`missing "call"`)
	case j.Return == nil:
		return op, errors.New(`missing "return"`)
	case isNull(j.Input):
		return op, errors.New(`missing "input"`)
	}
	op.ID, op.ClientID, op.Call, op.Return = *j.ID, *j.Client, *j.Call, *j.Return
	op.Unknown = j.Unknown != nil && *j.Unknown
	if err := decodeValue(j.Input, &op.Input); err != nil {
		return op, fmt.Errorf(`"input": %w`, err)
	}
	switch {
	case op.Unknown && !isNull(j.Output):
		return op, errors.New(`"output" given for an operation whose outcome is unknown`)
	case !op.Unknown && isNull(j.Output):
		return op, errors.New(`missing "output" (set "unknown": true if the outcome is unknown)`)
	case !op.Unknown:
		if err := decodeValue(j.Output, &op.Output); err != nil {
			return op, fmt.Errorf(`"output": %w`, err)
		}
	}
	return op, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

func decodeValue[T any](raw json.RawMessage, v *T) error {
	if err := strictUnmarshal(raw, v); err != nil {
		return err
	}
	if val, ok := any(v).(validator); ok {
		return val.Validate()
	}
	if val, ok := any(*v).(validator); ok {
		return val.Validate()
	}
	return nil
}

// strictUnmarshal decodes exactly one JSON value from data into v,
// rejecting unknown members and trailing data. A syntax error, a value of
// the wrong type and trailing data come as an *offsetError.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return errors.New("empty input")
		case errors.As(err, &syntax):
			return &offsetError{off: syntax.Offset - 1, err: err} // Offset is past the bad byte
		case errors.As(err, &typ):
			return &offsetError{off: typ.Offset, err: err}
		case errors.Is(err, io.ErrUnexpectedEOF):
			return &offsetError{off: int64(len(data)), err: errors.New("unexpected end of input")}
		}
		return err
	}
	off := dec.InputOffset()
	rest := bytes.TrimLeft(data[off:], " \t\r\n")
	if len(rest) > 0 {
		return &offsetError{off: int64(len(data) - len(rest)), err: errors.New("data after the JSON value")}
	}
	return nil
}

// EncodeHistory writes h in the JSON history format, one operation per
// line. Unknown operations are written without "output".
func EncodeHistory[I, O any](w io.Writer, h []Operation[I, O]) error {
	return encodeOperations(w, "{\"operations\": [", h)
}

// encodeOperations writes head, then h's operations, one a line, and the
// end of the array and the document.
func encodeOperations[I, O any](w io.Writer, head string, h []Operation[I, O]) error {
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	for i := range h {
		op := &h[i]
		j := jsonOperation{ID: &op.ID, Client: &op.ClientID, Call: &op.Call, Return: &op.Return}
		var err error
		if j.Input, err = json.Marshal(op.Input); err != nil {
			return fmt.Errorf("linearize: operation %d: input: %w", i, err)
		}
		if op.Unknown {
			j.Unknown = &op.Unknown
		} else if j.Output, err = json.Marshal(op.Output); err != nil {
			return fmt.Errorf("linearize: operation %d: output: %w", i, err)
		}
		line, err := json.Marshal(jsonLine(j))
		if err != nil {
			return fmt.Errorf("linearize: operation %d: %w", i, err)
		}
		sep := ",\n  "
		if i == 0 {
			sep = "\n  "
		}
		if _, err := fmt.Fprintf(w, "%s%s", sep, line); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "\n]}\n")
	return err
}

// jsonLine is jsonOperation with empty members left out.
type jsonLine struct {
	ID      *int            `json:"id"`
	Client  *int            `json:"client"`
	Call    *int64          `json:"call"`
	Return  *int64          `json:"return"`
	Input   json.RawMessage `json:"input"`
	Output  json.RawMessage `json:"output,omitempty"`
	Unknown *bool           `json:"unknown,omitempty"`
}

// Validate rejects an input whose op is missing or unknown.
func (in LeaseInput) Validate() error {
	if in.Op < Acquire || in.Op > Renew {
		return fmt.Errorf("invalid lease op %d", in.Op)
	}
	return nil
}

// Validate rejects an input whose op is missing or unknown.
func (in KVInput) Validate() error {
	if in.Op < Get || in.Op > Append {
		return fmt.Errorf("invalid kv op %d", in.Op)
	}
	return nil
}

// Validate rejects an input whose op is missing or not Read or Write.
func (in RegisterInput[V]) Validate() error {
	if in.Op != Read && in.Op != Write {
		return fmt.Errorf("invalid register op %d (want read or write)", in.Op)
	}
	return nil
}

// Validate rejects an input whose op is missing or unknown.
func (in FencedInput[V]) Validate() error {
	if in.Op < Read || in.Op > Peek {
		return fmt.Errorf("invalid fenced register op %d", in.Op)
	}
	return nil
}
