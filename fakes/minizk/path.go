package minizk

import (
	"strings"
	"unicode/utf8"
)

// validPath reports whether p is a path ZooKeeper accepts
// (PathUtils.validatePath): absolute, no trailing slash except for the
// root, no empty, "." or ".." component, and none of the characters it
// forbids. A sequential create is checked with a digit appended, as the
// sequence number will be.
func validPath(p string, sequential bool) bool {
	if sequential {
		p += "1"
	}
	if p == "" || p[0] != '/' {
		return false
	}
	if p == "/" {
		return true
	}
	if strings.HasSuffix(p, "/") || !utf8.ValidString(p) {
		return false
	}
	for _, part := range strings.Split(p[1:], "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	for _, c := range p {
		if forbidden(c) {
			return false
		}
	}
	return true
}

// forbidden reports whether ZooKeeper refuses c in a path.
func forbidden(c rune) bool {
	return c < 0x20 || (c >= 0x7f && c <= 0x9f) || (c >= 0xd800 && c <= 0xf8ff) || (c >= 0xfff0 && c <= 0xffff)
}

// parentOf returns the parent of a valid non-root path and the last
// component.
func parentOf(p string) (parent, name string) {
	i := strings.LastIndexByte(p, '/')
	if i == 0 {
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// childPath joins a parent path and a child's name.
func childPath(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}
