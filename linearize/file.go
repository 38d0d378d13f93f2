package linearize

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// A history file is the JSON history format (see DecodeHistory) with two
// more members at the top, "version" and "model":
//
//	{"version": 2,
//	 "model": {"kind": "lease", "ttl": 10000000000, "tolerance": 10000000},
//	 "operations": [ ... ]}
//
// Version 2 carries the model the history is to be checked against (a
// Spec); version 1, or no "version" at all (the files written before the
// model travelled with them), carries none, and the reader supplies it.
// Any other version is an error, as is a "model" in a version 1 file or
// none in a version 2 file.
const (
	versionOperations = 1 // "operations" alone
	versionModel      = 2 // "model" and "operations"
)

// jsonSpec is a Spec's wire form; pointers tell a missing member from a
// zero one.
type jsonSpec struct {
	Kind      *string `json:"kind"`
	Permits   *int    `json:"permits,omitempty"`
	TTL       *int64  `json:"ttl,omitempty"`
	Tolerance *int64  `json:"tolerance,omitempty"`
}

// MarshalJSON writes s in its JSON form (see Spec), or fails when s is
// not valid.
func (s Spec) MarshalJSON() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	kind := string(s.Kind)
	j := jsonSpec{Kind: &kind}
	if s.Kind == KindSemaphore {
		j.Permits = &s.Permits
	}
	if s.Kind.leased() {
		ttl, tol := int64(s.TTL), int64(s.Tolerance)
		j.TTL, j.Tolerance = &ttl, &tol
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads s from its JSON form, strictly: an unknown member,
// a missing "kind", a value of the wrong type or a spec that Validate
// rejects is an error that says which.
func (s *Spec) UnmarshalJSON(data []byte) error {
	var j jsonSpec
	if err := strictUnmarshal(data, &j); err != nil {
		return err
	}
	if j.Kind == nil {
		return errNoKind
	}
	v := Spec{Kind: ModelKind(*j.Kind)}
	if j.Permits != nil {
		v.Permits = *j.Permits
	}
	if j.TTL != nil {
		v.TTL = time.Duration(*j.TTL)
	}
	if j.Tolerance != nil {
		v.Tolerance = time.Duration(*j.Tolerance)
	}
	if err := v.Validate(); err != nil {
		return err
	}
	*s = v
	return nil
}

// fileHeader reads the version and model of the decoded document doc of
// data: the model, or nil for a file of version 1.
func fileHeader(data []byte, doc *jsonHistory) (*Spec, error) {
	version := versionOperations
	if doc.Version != nil {
		version = *doc.Version
	}
	switch {
	case version != versionOperations && version != versionModel:
		return nil, fmt.Errorf(`"version" %d: this reader knows %d (no "model") and %d`, version, versionOperations, versionModel)
	case version == versionOperations && !isNull(doc.Model):
		return nil, fmt.Errorf(`"model" in a file of version %d (a model needs "version": %d)`, versionOperations, versionModel)
	case version == versionModel && isNull(doc.Model):
		return nil, fmt.Errorf(`missing "model" (a file of version %d names its model)`, versionModel)
	case version == versionOperations:
		return nil, nil
	}
	var s Spec
	if err := strictUnmarshal(doc.Model, &s); err != nil {
		where := ""
		if k := bytes.Index(data, doc.Model); k >= 0 {
			where = " (" + position(data, int64(k)) + ")"
		}
		return nil, fmt.Errorf(`"model"%s: %w`, where, err)
	}
	return &s, nil
}

// File is a history with the model it is to be checked against, the type
// of its operations hidden: what a history file holds. Make one with
// NewFile or ReadFile.
type File struct {
	spec Spec
	h    fileHistory
}

// fileHistory is a File's history with its checker.
type fileHistory interface {
	len() int
	check(ctx context.Context, opts Options) (Result, error)
	draw(w io.Writer, html bool, res *Result, p Picture) error
	encode(w io.Writer) error
	operations() []Operation[any, any]
}

// boundHistory is a history of inputs I and outputs O with its checker.
type boundHistory[I, O any] struct {
	c Checker[I, O]
	h []Operation[I, O]
}

func (b boundHistory[I, O]) len() int { return len(b.h) }

func (b boundHistory[I, O]) check(ctx context.Context, opts Options) (Result, error) {
	return b.c.Check(ctx, b.h, opts)
}

func (b boundHistory[I, O]) draw(w io.Writer, html bool, res *Result, p Picture) error {
	if html {
		return b.c.WriteHTML(w, b.h, res, p)
	}
	return b.c.WriteText(w, b.h, res, p)
}

func (b boundHistory[I, O]) encode(w io.Writer) error { return EncodeFile(w, b.c.spec, b.h) }

func (b boundHistory[I, O]) operations() []Operation[any, any] {
	out := make([]Operation[any, any], len(b.h))
	for i, op := range b.h {
		out[i] = Operation[any, any]{ID: op.ID, ClientID: op.ClientID, Call: op.Call, Return: op.Return,
			Unknown: op.Unknown, Input: op.Input, Output: op.Output}
	}
	return out
}

// NewFile makes the File of history h and the model s names. It returns
// an error wrapping ErrInvalidModel when s is not valid or its model
// checks operations of other types.
func NewFile[I, O any](s Spec, h []Operation[I, O]) (*File, error) {
	c, err := Bind[I, O](s)
	if err != nil {
		return nil, err
	}
	return &File{spec: s, h: boundHistory[I, O]{c: c, h: h}}, nil
}

// ReadFile reads a history file (version 2, with its model) or a JSON
// history without a model (version 1), which is then checked against def.
// A malformed document is an error wrapping ErrDecode that says where
// and why; an invalid def, one wrapping ErrInvalidModel.
func ReadFile(r io.Reader, def Spec) (*File, error) { return readFile(r, def, false) }

// ReadFileAs is ReadFile with the model s, whatever model the file names.
func ReadFileAs(r io.Reader, s Spec) (*File, error) { return readFile(r, s, true) }

func readFile(r io.Reader, s Spec, force bool) (*File, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, decodeError(err)
	}
	if !force {
		var doc jsonHistory
		if err := strictUnmarshal(data, &doc); err != nil {
			return nil, decodeError(atOffset(data, err))
		}
		named, err := fileHeader(data, &doc)
		if err != nil {
			return nil, decodeError(err)
		}
		if named != nil {
			s = *named
		}
	}
	b, err := s.build()
	if err != nil {
		return nil, err
	}
	h, err := b.decode(data)
	if err != nil {
		return nil, err
	}
	return &File{spec: s, h: h}, nil
}

// Spec is the model the history is checked against.
func (f *File) Spec() Spec { return f.spec }

// Len is the number of operations.
func (f *File) Len() int { return f.h.len() }

// Operations returns a copy of the history, inputs and outputs boxed.
func (f *File) Operations() []Operation[any, any] { return f.h.operations() }

// Check checks the history against the model (see the package's Check).
func (f *File) Check(ctx context.Context, opts Options) (Result, error) {
	return f.h.check(ctx, opts)
}

// WriteText draws the history and res for a terminal (the package's
// WriteText, with the model's lease windows).
func (f *File) WriteText(w io.Writer, res *Result, p Picture) error {
	return f.h.draw(w, false, res, p)
}

// WriteHTML draws the history and res as an HTML page (the package's
// WriteHTML, with the model's lease windows).
func (f *File) WriteHTML(w io.Writer, res *Result, p Picture) error {
	return f.h.draw(w, true, res, p)
}

// WriteJSON writes the file: the history with its model (EncodeFile).
func (f *File) WriteJSON(w io.Writer) error { return f.h.encode(w) }

// EncodeFile writes h with its model s as a history file of version 2,
// one operation per line. It returns an error wrapping ErrInvalidModel
// when s is not valid or its model checks operations of other types.
func EncodeFile[I, O any](w io.Writer, s Spec, h []Operation[I, O]) error {
	if _, err := Bind[I, O](s); err != nil {
		return err
	}
	model, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return encodeOperations(w, fmt.Sprintf("{\"version\": %d,\n \"model\": %s,\n \"operations\": [", versionModel, model), h)
}
