package deploytest

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// givenZones are the zones shape PushAndProxy gives (AvailabilityZoneA,
// AvailabilityZoneB): not the region's first two.
var givenZones = [2]string{"us-east-1c", "us-east-1d"}

// TestNetworkZones: the stack's own network's two private subnets, and so
// the interface endpoint in them (Secrets Manager), are in the zones
// AvailabilityZoneA and AvailabilityZoneB name when given (an interface
// endpoint's service is not in every zone: aws ec2
// describe-vpc-endpoint-services says where), and in
// the region's first two (!GetAZs) when not, as before, in the template
// CloudFormation gets.
func TestNetworkZones(t *testing.T) {
	subnets := []string{"PrivateSubnetA", "PrivateSubnetB"}
	forEachShape(t, func(t *testing.T, s *shape) {
		created := s.resources()
		if _, ok := created["PrivateSubnetA"]; !ok {
			return // a given network: its subnets are where they are
		}
		for _, id := range []string{"SecretsManagerEndpoint"} {
			ep, ok := created[id]
			if !ok {
				continue
			}
			var in []string
			for _, n := range get(ep, "Properties", "SubnetIds").Content {
				in = append(in, ref(n))
			}
			if !slices.Equal(in, subnets) {
				t.Errorf("%s: SubnetIds %v, want %v", id, in, subnets)
			}
		}
		given := s.params["AvailabilityZoneA"][0] != ""
		for i, id := range subnets {
			az := get(created[id], "Properties", "AvailabilityZone")
			if given {
				if name, _ := fn(az); name != "Ref" || s.str(az) != givenZones[i] {
					t.Errorf("%s: AvailabilityZone %s, want %s (the parameter)", id, canon(az), givenZones[i])
				}
				continue
			}
			name, args := fn(az)
			if name != "Fn::Select" || len(args) != 2 || args[0].Value != strconv.Itoa(i) {
				t.Errorf("%s: AvailabilityZone %s, want Fn::Select [%d, Fn::GetAZs]", id, canon(az), i)
				continue
			}
			if inner, _ := fn(args[1]); inner != "Fn::GetAZs" {
				t.Errorf("%s: AvailabilityZone selects from %s, want Fn::GetAZs", id, canon(args[1]))
			}
		}
	})
}

// TestNetworkZonesRules: the zones come both or neither, two of them, and
// only for the stack's own network; CloudFormation refuses any other set
// before it creates anything.
func TestNetworkZonesRules(t *testing.T) {
	tpl := loadTemplate(t)
	with := func(base map[string]string, kv ...string) map[string]string {
		m := maps.Clone(base)
		if m == nil {
			m = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		params  map[string]string
		refusal string // the rule that refuses it, or "" for none
	}{
		{"Neither", nil, ""},
		{"Both", with(nil, "AvailabilityZoneA", "us-east-1c", "AvailabilityZoneB", "us-east-1d"), ""},
		{"OnlyA", with(nil, "AvailabilityZoneA", "us-east-1c"), "ZonesTogether"},
		{"OnlyB", with(nil, "AvailabilityZoneB", "us-east-1d"), "ZonesTogether"},
		{"TheSameTwice", with(nil, "AvailabilityZoneA", "us-east-1c", "AvailabilityZoneB", "us-east-1c"), "ZonesTogether"},
		{"GivenNetwork", with(besideThePlatform, "AvailabilityZoneA", "us-east-1c", "AvailabilityZoneB", "us-east-1d"), "GivenNetworkHasItsZones"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refused := newShape(t, tpl, tc.params).refused()
			if tc.refusal == "" && len(refused) > 0 {
				t.Errorf("refused: %v; want accepted", refused)
			}
			if tc.refusal != "" && !slices.ContainsFunc(refused, func(r string) bool { return strings.HasPrefix(r, tc.refusal+":") }) {
				t.Errorf("refused: %v; want refused by %s", refused, tc.refusal)
			}
		})
	}
}
