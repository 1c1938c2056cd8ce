package poolblock

import (
	"encoding/json"
	"net/netip"
	"testing"
)

func TestClaimAndGrantRoundTrip(t *testing.T) {
	c := Claim{Node: "n1", Want: map[string]int{"ipv4": 2}, Release: []netip.Prefix{netip.MustParsePrefix("10.2.0.0/26")}}
	b, _ := json.Marshal(c)
	got, err := ParseClaim(b)
	if err != nil || got.Node != "n1" || got.Want["ipv4"] != 2 || got.Release[0] != c.Release[0] {
		t.Fatalf("ParseClaim(%s) = %+v, %v", b, got, err)
	}
	g := Grant{Node: "n1", Blocks: []netip.Prefix{netip.MustParsePrefix("fd00:2::/120")}}
	b, _ = json.Marshal(g)
	gg, err := ParseGrant(b)
	if err != nil || gg.Blocks[0] != g.Blocks[0] {
		t.Fatalf("ParseGrant(%s) = %+v, %v", b, gg, err)
	}
	if Family(g.Blocks[0]) != "ipv6" || Family(c.Release[0]) != "ipv4" {
		t.Fatal("Family")
	}
}

func TestBadClaimsAreRefused(t *testing.T) {
	for _, v := range []string{`{`, `{"want":{"ipx":1}}`, `{"want":{"ipv4":-1}}`, `{"release":["nope"]}`} {
		if _, err := ParseClaim([]byte(v)); err == nil {
			t.Errorf("ParseClaim(%s) accepted", v)
		}
	}
}
