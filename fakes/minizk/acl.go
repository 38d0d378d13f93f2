package minizk

import (
	"crypto/sha1"
	"encoding/base64"
	"net"
	"strings"
)

// Permissions of an ACL entry (ZooDefs.Perms).
const (
	permRead   int32 = 1
	permWrite  int32 = 2
	permCreate int32 = 4
	permDelete int32 = 8
	permAdmin  int32 = 16
)

// identity is one scheme:id a connection is authenticated as.
type identity struct{ scheme, id string }

// digestID returns the id a digest ACL names for user and password,
// "user:" and the base64 of the SHA-1 of "user:password", as ZooKeeper's
// DigestAuthenticationProvider derives it.
func digestID(user, password string) string {
	sum := sha1.Sum([]byte(user + ":" + password))
	return user + ":" + base64.StdEncoding.EncodeToString(sum[:])
}

// digestOf is the identity an addAuth of the digest scheme with
// "user:password" gives; credentials without a colon are kept whole as the
// user, with an empty password.
func digestOf(cred []byte) identity {
	user, password, _ := strings.Cut(string(cred), ":")
	return identity{"digest", digestID(user, password)}
}

// ipOf is the ip identity of a connection's remote address ("" when it
// has none, as an in-memory connection).
func ipOf(addr net.Addr) (identity, bool) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return identity{}, false
	}
	return identity{"ip", tcp.IP.String()}, true
}

// superLocked reports whether the identities include the server's super
// user (WithSuperDigest), who passes every ACL check.
func (s *Server) superLocked(ids []identity) bool {
	if s.cfg.superDigest == "" {
		return false
	}
	for _, id := range ids {
		if id.scheme == "digest" && id.id == s.cfg.superDigest {
			return true
		}
	}
	return false
}

// allowed reports whether a connection with the identities ids may do
// what perm asks on a node with the ACL acl: some entry that grants one of
// perm's bits matches one of the identities, as ZooKeeper's checkACL does.
func allowed(acl []ACL, perm int32, ids []identity, super bool) bool {
	if super {
		return true
	}
	for _, a := range acl {
		if a.Perms&perm == 0 {
			continue
		}
		switch a.Scheme {
		case "world":
			if a.ID == "anyone" {
				return true
			}
		case "digest", "ip":
			for _, id := range ids {
				if id.scheme == a.Scheme && idMatches(a.Scheme, a.ID, id.id) {
					return true
				}
			}
		}
	}
	return false
}

// idMatches reports whether an ACL's id matches an identity's: equal for
// digest; for ip the address, or an address within the ACL's network.
func idMatches(scheme, aclID, id string) bool {
	if scheme != "ip" || aclID == id {
		return aclID == id
	}
	_, network, err := net.ParseCIDR(aclID)
	ip := net.ParseIP(id)
	return err == nil && ip != nil && network.Contains(ip)
}

// redacted is the ACL a reader without ADMIN permission is shown, as
// ZooKeeper shows it: each digest id's hash replaced by "x".
func redacted(acl []ACL) []ACL {
	out := make([]ACL, len(acl))
	for i, a := range acl {
		if user, _, ok := strings.Cut(a.ID, ":"); ok && a.Scheme == "digest" {
			a.ID = user + ":x"
		}
		out[i] = a
	}
	return out
}

// fixupACL returns the ACL a create or setACL stores, as ZooKeeper's
// fixupACL does: an "auth" entry stands for every digest identity of the
// connection (INVALIDACL when it has none); the other entries are
// validated by checkACL.
func (x *txn) fixupACL(acl []ACL) ([]ACL, Code) {
	if c := x.checkACL(acl); c != CodeOK {
		return nil, c
	}
	out := make([]ACL, 0, len(acl))
	for _, a := range acl {
		if a.Scheme != "auth" {
			out = append(out, a)
			continue
		}
		for _, id := range x.ids {
			if id.scheme == "digest" {
				out = append(out, ACL{Perms: a.Perms, Scheme: "digest", ID: id.id})
			}
		}
	}
	return out, CodeOK
}

// may reports whether the transaction's connection may do perm on a node
// with the ACL acl.
func (x *txn) may(acl []ACL, perm int32) bool { return allowed(acl, perm, x.ids, x.super) }

// hasDigest reports whether the connection added digest credentials.
func (x *txn) hasDigest() bool {
	for _, id := range x.ids {
		if id.scheme == "digest" {
			return true
		}
	}
	return false
}

func containsID(ids []identity, id identity) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
