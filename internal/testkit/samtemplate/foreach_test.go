package samtemplate

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// canon writes a node as CloudFormation reads it, whatever its YAML style:
// tags kept, mappings and sequences in order.
func canon(n *yaml.Node) string {
	if n == nil {
		return "<nil>"
	}
	tag := n.Tag
	if tag == "!!str" || tag == "!!map" || tag == "!!seq" || tag == "!!int" || tag == "!!bool" {
		tag = ""
	}
	switch n.Kind {
	case yaml.DocumentNode:
		return canon(n.Content[0])
	case yaml.MappingNode:
		var parts []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			parts = append(parts, n.Content[i].Value+": "+canon(n.Content[i+1]))
		}
		return tag + "{" + strings.Join(parts, ", ") + "}"
	case yaml.SequenceNode:
		var parts []string
		for _, c := range n.Content {
			parts = append(parts, canon(c))
		}
		return tag + "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprintf("%s%q", tag, n.Value)
}

// TestForEachExpandsAsCloudFormation: the examples of CloudFormation's
// Fn::ForEach reference (resources, nested loops, outputs, the Mappings
// lookup with a default), and this template's own shapes, expand to what
// the reference shows.
func TestForEachExpandsAsCloudFormation(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"Tables", `
Transform: AWS::LanguageExtensions
Resources:
  Fn::ForEach::Tables:
    - TableName
    - [Points, Score]
    - DynamoDB${TableName}:
        Type: AWS::DynamoDB::Table
        Properties:
          TableName: !Ref TableName
`, `
Resources:
  DynamoDBPoints: {Type: AWS::DynamoDB::Table, Properties: {TableName: Points}}
  DynamoDBScore: {Type: AWS::DynamoDB::Table, Properties: {TableName: Score}}
`},
		{"NatGatewaysWithConditionsFromMappings", `
Transform: AWS::LanguageExtensions
Mappings:
  NatGateway:
    Condition:
      B: TwoNatGateways
Resources:
  Fn::ForEach::NatGatewayAndEIP:
    - Identifier
    - [A, B]
    - NatGateway${Identifier}:
        Type: AWS::EC2::NatGateway
        Properties:
          AllocationId: !GetAtt [!Sub "NatGatewayAttachment${Identifier}", AllocationId]
          SubnetId: !Ref
            Fn::Sub: PublicSubnet${Identifier}
        Condition: !FindInMap [NatGateway, Condition, !Ref Identifier, DefaultValue: !Ref AWS::NoValue]
`, `
Resources:
  NatGatewayA:
    Type: AWS::EC2::NatGateway
    Properties: {AllocationId: !GetAtt [NatGatewayAttachmentA, AllocationId], SubnetId: !Ref PublicSubnetA}
  NatGatewayB:
    Type: AWS::EC2::NatGateway
    Properties: {AllocationId: !GetAtt [NatGatewayAttachmentB, AllocationId], SubnetId: !Ref PublicSubnetB}
    Condition: TwoNatGateways
`},
		{"NestedLoops", `
Transform: [AWS::LanguageExtensions, AWS::Serverless-2016-10-31]
Resources:
  VPC: {Type: AWS::EC2::VPC}
  Fn::ForEach::SubnetResources:
    - Prefix
    - [Transit, Public]
    - Nacl${Prefix}Subnet:
        Type: AWS::EC2::NetworkAcl
      Fn::ForEach::LoopInner:
        - Suffix
        - [A, B]
        - Nacl${Prefix}Subnet${Suffix}Association:
            Type: AWS::EC2::SubnetNetworkAclAssociation
            Properties:
              SubnetId: {Ref: {"Fn::Sub": "${Prefix}Subnet${Suffix}"}}
              NetworkAclId: {Ref: !Sub "Nacl${Prefix}Subnet"}
`, `
Resources:
  VPC: {Type: AWS::EC2::VPC}
  NaclTransitSubnet: {Type: AWS::EC2::NetworkAcl}
  NaclTransitSubnetAAssociation:
    Type: AWS::EC2::SubnetNetworkAclAssociation
    Properties: {SubnetId: !Ref TransitSubnetA, NetworkAclId: !Ref NaclTransitSubnet}
  NaclTransitSubnetBAssociation:
    Type: AWS::EC2::SubnetNetworkAclAssociation
    Properties: {SubnetId: !Ref TransitSubnetB, NetworkAclId: !Ref NaclTransitSubnet}
  NaclPublicSubnet: {Type: AWS::EC2::NetworkAcl}
  NaclPublicSubnetAAssociation:
    Type: AWS::EC2::SubnetNetworkAclAssociation
    Properties: {SubnetId: !Ref PublicSubnetA, NetworkAclId: !Ref NaclPublicSubnet}
  NaclPublicSubnetBAssociation:
    Type: AWS::EC2::SubnetNetworkAclAssociation
    Properties: {SubnetId: !Ref PublicSubnetB, NetworkAclId: !Ref NaclPublicSubnet}
`},
		{"Outputs", `
Transform: AWS::LanguageExtensions
Outputs:
  Fn::ForEach::BucketOutputs:
    - Identifier
    - [A]
    - Fn::ForEach::GetAttLoop:
        - Property
        - [Arn, DomainName]
        - S3Bucket${Identifier}${Property}:
            Value: !GetAtt [!Sub "S3Bucket${Identifier}", !Ref Property]
`, `
Outputs:
  S3BucketAArn: {Value: !GetAtt [S3BucketA, Arn]}
  S3BucketADomainName: {Value: !GetAtt [S3BucketA, DomainName]}
`},
		{"StringsSubsAndAmpersand", `
Transform: AWS::LanguageExtensions
Mappings:
  Routes:
    Upload: {Route: POST/workspaces/*/chat/uploads}
Resources:
  Fn::ForEach::Logs:
    - Fn
    - [Upload]
    - ${Fn}Logs:
        Type: AWS::Logs::LogGroup
        Properties:
          LogGroupName: !Sub "/aws/lambda/${AWS::StackName}/${Fn}"
          Other: !If [HasIt, !Ref Fn, "plain ${Fn}"]
      ${Fn}RouteInvoke:
        Type: AWS::Lambda::Permission
        Properties:
          FunctionName: !Ref Upload
          SourceArn: !Sub ["${Api}/${Route}", {Route: !FindInMap [Routes, !Ref Fn, Route]}]
  Fn::ForEach::Paths:
    - Path
    - [a/b-c]
    - Key&{Path}:
        Type: X
        Properties: {P: !Sub "${Path}"}
`, `
Resources:
  UploadLogs:
    Type: AWS::Logs::LogGroup
    Properties: {LogGroupName: !Sub "/aws/lambda/${AWS::StackName}/Upload", Other: !If [HasIt, Upload, plain Upload]}
  UploadRouteInvoke:
    Type: AWS::Lambda::Permission
    Properties: {FunctionName: !Ref Upload, SourceArn: !Sub ["${Api}/${Route}", {Route: POST/workspaces/*/chat/uploads}]}
  Keyabc: {Type: X, Properties: {P: !Sub "a/b-c"}}
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc, err := Parse([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			var want yaml.Node
			if err := yaml.Unmarshal([]byte(c.want), &want); err != nil {
				t.Fatal(err)
			}
			for _, section := range []string{"Resources", "Outputs"} {
				if w := Get(&want, section); w != nil {
					if got := canon(Get(doc, section)); got != canon(w) {
						t.Errorf("%s:\ngot  %s\nwant %s", section, got, canon(w))
					}
				}
			}
		})
	}
}

// TestForEachRefusesWhatCloudFormationRefuses: a loop without the
// transform, the transform after SAM's, two items making one key, a key
// without the identifier, and a Mappings lookup that finds nothing fail
// the read, as they fail the transform or the stack.
func TestForEachRefusesWhatCloudFormationRefuses(t *testing.T) {
	loop := func(transform, key, body string) string {
		return "Transform: " + transform + `
Mappings:
  M: {A: {K: v}}
Resources:
  Fn::ForEach::L:
    - X
    - [A, B]
    - ` + key + `:
        Type: T
        Properties: {P: ` + body + `}
`
	}
	for name, c := range map[string]struct{ in, err string }{
		"NoTransform":         {loop("AWS::Serverless-2016-10-31", "R${X}", "x"), "without Transform"},
		"AfterSAM":            {loop("[AWS::Serverless-2016-10-31, AWS::LanguageExtensions]", "R${X}", "x"), "must come before"},
		"KeyWithoutItsItem":   {loop("AWS::LanguageExtensions", "R", "x"), "does not name ${X}"},
		"TwoItemsOneKey":      {loop("AWS::LanguageExtensions", "R${X}", "x") + "  RA: {Type: T}\n", "RA is made twice"},
		"MappingKeyMissing":   {loop("AWS::LanguageExtensions", "R${X}", "!FindInMap [M, !Ref X, K]"), "M.B.K: no such entry"},
		"CollectionParameter": {"Transform: AWS::LanguageExtensions\nResources:\n  Fn::ForEach::L:\n    - X\n    - !Ref P\n    - R${X}: {Type: T}\n", "not a list of strings"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("got %v, want an error with %q", err, c.err)
			}
		})
	}
	if _, err := Parse([]byte(loop("AWS::LanguageExtensions", "R${X}", "!FindInMap [M, !Ref X, K, DefaultValue: d]"))); err != nil {
		t.Errorf("a lookup with a DefaultValue: %v", err)
	}
}
