package deploytest

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/pendinguploads/pendinguploads/internal/config"
)

// besideThePlatform is the parameter set of a deploy into an existing
// network and database (docs/deploy.md, "Deploy beside the platform").
var besideThePlatform = map[string]string{
	"SubnetIds":         "subnet-0a,subnet-0b",
	"SecurityGroupIds":  "sg-0a",
	"DatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:platform-db-AbCdEf",
}

// ownNetwork are the resource types of the stack's own network and
// database, which only the deploy from zero creates.
var ownNetwork = []string{
	"AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::RouteTable", "AWS::EC2::SubnetRouteTableAssociation",
	"AWS::EC2::VPCEndpoint", "AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupEgress", "AWS::EC2::SecurityGroupIngress",
	"AWS::RDS::DBSubnetGroup", "AWS::RDS::DBInstance", "AWS::RDS::DBCluster",
	"AWS::RDS::DBProxy", "AWS::RDS::DBProxyTargetGroup",
}

// TestEveryParameterHasADefault: `sam deploy --guided` in an empty
// account can take every default; a parameter without one is a question
// the empty account has no answer to.
func TestEveryParameterHasADefault(t *testing.T) {
	tpl := loadTemplate(t)
	params := get(tpl.doc, "Parameters")
	for i := 0; i+1 < len(params.Content); i += 2 {
		if get(params.Content[i+1], "Default") == nil {
			t.Errorf("Parameters.%s has no Default", params.Content[i].Value)
		}
	}
	for name, want := range map[string]string{"EnableContentBucket": "true", "MaxFileBytes": strconv.Itoa(config.MaxFileBytesCap)} {
		if got := scalar(get(params, name, "Default")); got != want {
			t.Errorf("Parameters.%s: default %q, want %q (the production shape)", name, got, want)
		}
	}
}

// TestDeployFromZero: with every default, the stack creates its network
// (two private subnets in two zones, no way to the internet, an S3
// gateway endpoint and a Secrets Manager interface endpoint), security
// groups that let the functions reach the database on 5432 only and the
// endpoints on 443 only, a PostgreSQL database with an RDS-managed,
// encrypted, backed-up secret kept as a snapshot, a generated admin
// token, and the bucket; the functions run in that network and read
// those secrets; nothing names a resource this shape leaves out.
func TestDeployFromZero(t *testing.T) {
	tpl := loadTemplate(t)
	s := newShape(t, tpl, nil)
	if r := s.refused(); len(r) > 0 {
		t.Fatalf("the defaults break the Rules: %v", r)
	}
	s.checkRefs()
	created := s.resources()
	one := func(typ string) (string, *yaml.Node) {
		t.Helper()
		ids := s.ofType(typ)
		if len(ids) != 1 {
			t.Fatalf("%s: got %v, want one", typ, ids)
		}
		return ids[0], created[ids[0]]
	}

	vpcID, vpc := one("AWS::EC2::VPC")
	if lit(get(vpc, "Properties", "EnableDnsSupport")) != "true" || lit(get(vpc, "Properties", "EnableDnsHostnames")) != "true" {
		t.Errorf("%s: DNS support and hostnames must be on (the interface endpoint's private DNS)", vpcID)
	}
	subnets := s.ofType("AWS::EC2::Subnet")
	zones := map[string]bool{}
	for _, id := range subnets {
		zones[canon(get(created[id], "Properties", "AvailabilityZone"))] = true
		if get(created[id], "Properties", "MapPublicIpOnLaunch") != nil {
			t.Errorf("%s: MapPublicIpOnLaunch set; the subnets are private", id)
		}
	}
	if len(subnets) != 2 || len(zones) != 2 {
		t.Errorf("subnets %v in %d zones, want 2 in 2", subnets, len(zones))
	}
	for _, typ := range []string{"AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::Route", "AWS::EC2::EIP"} {
		if ids := s.ofType(typ); len(ids) > 0 {
			t.Errorf("%s %v: the network has no way to the internet, and pays for none", typ, ids)
		}
	}
	services := map[string]string{}
	for _, id := range s.ofType("AWS::EC2::VPCEndpoint") {
		p := get(created[id], "Properties")
		svc := get(p, "ServiceName")
		services[strings.TrimPrefix(svc.Value, "com.amazonaws.${AWS::Region}.")] = scalar(get(p, "VpcEndpointType"))
	}
	// dynamodb: push is on from zero (PushEndpoint discover), and the
	// upload function writes its hints to the hint table through it. No
	// interface endpoint (each bills by the hour): the functions sign in
	// to the database with IAM tokens and read no secret (issue 42).
	if want := map[string]string{"s3": "Gateway", "dynamodb": "Gateway"}; !mapsEqual(services, want) {
		t.Errorf("VPC endpoints: got %v, want %v (the only AWS APIs the functions in it call)", services, want)
	}

	// The functions run in the stack's subnets, with its function group.
	vc := s.resolve(get(tpl.doc, "Globals", "Function", "VpcConfig"))
	var subnetRefs []string
	for _, n := range get(vc, "SubnetIds").Content {
		subnetRefs = append(subnetRefs, ref(n))
	}
	if slices.Sort(subnetRefs); !slices.Equal(subnetRefs, subnets) {
		t.Errorf("Globals VpcConfig.SubnetIds: got %v, want the stack's %v", subnetRefs, subnets)
	}
	sgs := get(vc, "SecurityGroupIds")
	if sgs == nil || len(sgs.Content) != 1 {
		t.Fatalf("Globals VpcConfig.SecurityGroupIds: want one group, got %s", canon(sgs))
	}
	fnSG := ref(sgs.Content[0])
	checkSecurityGroups(t, s, fnSG, "DatabaseSecurityGroup")

	// The database (an Aurora Serverless v2 cluster that pauses, and its
	// one instance) and its secret.
	dbID, db := one("AWS::RDS::DBCluster")
	for _, pol := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
		if got := scalar(get(db, pol)); got != "Snapshot" {
			t.Errorf("%s: %s %q, want Snapshot", dbID, pol, got)
		}
	}
	p := get(db, "Properties")
	for k, want := range map[string]string{
		"Engine": "aurora-postgresql", "ManageMasterUserPassword": "true", "StorageEncrypted": "true",
		"EnableIAMDatabaseAuthentication": "true", "EnableHttpEndpoint": "true", "MasterUsername": "pendinguploads",
		"DatabaseName": "pendinguploads",
	} {
		if got := lit(get(p, k)); got != want {
			t.Errorf("%s.%s: got %q, want %q", dbID, k, got, want)
		}
	}
	if get(p, "MasterUserPassword") != nil {
		t.Errorf("%s: MasterUserPassword set; RDS manages the password (ManageMasterUserPassword)", dbID)
	}
	if days, _ := strconv.Atoi(scalar(get(p, "BackupRetentionPeriod"))); days < 1 {
		t.Errorf("%s: BackupRetentionPeriod %q, want backups", dbID, scalar(get(p, "BackupRetentionPeriod")))
	}
	if got := ref(get(p, "VpcSecurityGroupIds").Content[0]); got != "DatabaseSecurityGroup" {
		t.Errorf("%s: VpcSecurityGroupIds %s, want DatabaseSecurityGroup", dbID, got)
	}
	scaling := get(p, "ServerlessV2ScalingConfiguration")
	if got := scalar(get(scaling, "MinCapacity")); got != "0" {
		t.Errorf("%s: MinCapacity %q, want 0 (it pauses when idle)", dbID, got)
	}
	if got := canon(get(scaling, "SecondsUntilAutoPause")); got != "Ref:DatabaseSecondsUntilAutoPause" {
		t.Errorf("%s: SecondsUntilAutoPause %s, want the parameter", dbID, got)
	}
	instID, inst := one("AWS::RDS::DBInstance")
	ip := get(inst, "Properties")
	if scalar(get(ip, "DBInstanceClass")) != "db.serverless" || ref(get(ip, "DBClusterIdentifier")) != dbID ||
		lit(get(ip, "PubliclyAccessible")) != "false" || lit(get(ip, "Engine")) != "aurora-postgresql" {
		t.Errorf("%s: want a private db.serverless instance of %s", instID, dbID)
	}
	for _, k := range []string{"MonitoringInterval", "PerformanceInsightsRetentionPeriod"} {
		if get(ip, k) != nil {
			t.Errorf("%s: %s set; it bills while the instance runs", instID, k)
		}
	}
	if lit(get(ip, "EnablePerformanceInsights")) == "true" {
		t.Errorf("%s: Performance Insights on; it bills while the instance runs", instID)
	}
	secret := "GetAtt:" + dbID + ".MasterUserSecret.SecretArn"
	for name, want := range map[string]string{
		// IAM database authentication: no secret at run time.
		"DB_SECRET_ARN": "!!str",
		"DB_IAM_USER":   "!!strpendinguploads_app",
		"DB_HOST":       "GetAtt:" + dbID + ".Endpoint.Address",
		"DB_PORT":       "GetAtt:" + dbID + ".Endpoint.Port",
		"DB_NAME":       "!!str" + scalar(get(p, "DatabaseName")),
	} {
		if got := s.env(name); got != want {
			t.Errorf("Globals %s: got %s, want %s", name, got, want)
		}
	}

	tokenID, token := one("AWS::SecretsManager::Secret")
	g := get(token, "Properties", "GenerateSecretString")
	if n, _ := strconv.Atoi(scalar(get(g, "PasswordLength"))); n < config.MinTokenLength || get(g, "SecretStringTemplate") != nil ||
		lit(get(g, "ExcludePunctuation")) != "true" {
		t.Errorf("%s: want a generated plain string of at least %d characters without punctuation (an Authorization header as it is)", tokenID, config.MinTokenLength)
	}
	checkFunctionSecrets(t, s, "", "Ref:"+tokenID)
	checkIAMDatabaseAuth(t, s, dbID, secret, "Ref:"+tokenID)

	if ids := s.ofType("AWS::S3::Bucket"); len(ids) != 1 || s.env("CONTENT_BUCKET") != "Ref:"+ids[0] {
		t.Errorf("the bucket: got %v and CONTENT_BUCKET %s, want one bucket the functions use", ids, s.env("CONTENT_BUCKET"))
	}
	for _, out := range []string{"ApiUrl", "ContentBucketName", "DatabaseEndpoint", "DatabaseSecretArn", "AdminTokenSecretArn"} {
		o := get(tpl.doc, "Outputs", out)
		if o == nil || (scalar(get(o, "Condition")) != "" && !s.condition(scalar(get(o, "Condition")))) {
			t.Errorf("output %s: missing in the deploy from zero", out)
		}
	}
}

// TestDeployBesideThePlatform: given subnets, security groups and a
// database secret, the stack creates none of the network, the database
// or its secret, and the functions use what was given; an empty
// AdminTokenSecretArn is still generated, a given one is used.
func TestDeployBesideThePlatform(t *testing.T) {
	tpl := loadTemplate(t)
	s := newShape(t, tpl, besideThePlatform)
	if r := s.refused(); len(r) > 0 {
		t.Fatalf("the platform's parameters break the Rules: %v", r)
	}
	s.checkRefs()
	for _, typ := range ownNetwork {
		if ids := s.ofType(typ); len(ids) > 0 {
			t.Errorf("%s %v created in an existing network", typ, ids)
		}
	}
	for name, want := range map[string]string{
		"DB_SECRET_ARN": "Ref:DatabaseSecretArn", "DB_HOST": "Ref:DatabaseHost", "DB_PORT": "!!str", "DB_NAME": "!!str",
		"DATABASE_QUERY_MODE": "Ref:DatabaseQueryMode",
	} {
		if got := s.env(name); got != want {
			t.Errorf("Globals %s: got %s, want %s", name, got, want)
		}
	}
	vc := s.resolve(get(tpl.doc, "Globals", "Function", "VpcConfig"))
	if ref(get(vc, "SubnetIds")) != "SubnetIds" || ref(get(vc, "SecurityGroupIds")) != "SecurityGroupIds" {
		t.Errorf("Globals VpcConfig: got %s %s, want the given SubnetIds and SecurityGroupIds",
			canon(get(vc, "SubnetIds")), canon(get(vc, "SecurityGroupIds")))
	}
	tokens := s.ofType("AWS::SecretsManager::Secret")
	if len(tokens) != 1 {
		t.Fatalf("secrets: got %v, want the generated admin token only", tokens)
	}
	checkFunctionSecrets(t, s, "Ref:DatabaseSecretArn", "Ref:"+tokens[0])
	checkBootstrap(t, s, "", "", "Ref:"+tokens[0])
	if o := get(tpl.doc, "Outputs", "DatabaseEndpoint"); o == nil || s.condition(scalar(get(o, "Condition"))) {
		t.Errorf("output DatabaseEndpoint: want it only for the stack's own database")
	}

	given := map[string]string{"AdminTokenSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:platform-admin-AbCdEf"}
	for k, v := range besideThePlatform {
		given[k] = v
	}
	s = newShape(t, tpl, given)
	s.checkRefs()
	if ids := s.ofType("AWS::SecretsManager::Secret"); len(ids) > 0 {
		t.Errorf("secrets %v created though AdminTokenSecretArn is given, want none", ids)
	}
	checkFunctionSecrets(t, s, "Ref:DatabaseSecretArn", "Ref:AdminTokenSecretArn")
	checkBootstrap(t, s, "", "", "Ref:AdminTokenSecretArn")

	// A proxy is only for the stack's own database.
	given["EnableDatabaseProxy"] = "true"
	s = newShape(t, tpl, given)
	s.checkRefs()
	if ids := s.ofType("AWS::RDS::DBProxy"); len(ids) > 0 || s.env("DATABASE_QUERY_MODE") != "Ref:DatabaseQueryMode" {
		t.Errorf("EnableDatabaseProxy beside the platform: proxies %v, DATABASE_QUERY_MODE %s; want none, and the parameter's mode",
			ids, s.env("DATABASE_QUERY_MODE"))
	}
}

// TestMixedShapesAreRefused: the network, the database and its secret
// are the stack's own or all given; the Rules refuse any mix before
// anything is created.
func TestMixedShapesAreRefused(t *testing.T) {
	tpl := loadTemplate(t)
	for name, params := range map[string]map[string]string{
		"SubnetsWithoutDatabase":   {"SubnetIds": "subnet-0a,subnet-0b", "SecurityGroupIds": "sg-0a"},
		"SubnetsWithoutGroups":     {"SubnetIds": "subnet-0a", "DatabaseSecretArn": besideThePlatform["DatabaseSecretArn"]},
		"DatabaseWithoutNetwork":   {"DatabaseSecretArn": besideThePlatform["DatabaseSecretArn"]},
		"GroupsWithoutSubnets":     {"SecurityGroupIds": "sg-0a"},
		"DatabaseHostOwnDatabase":  {"DatabaseHost": "proxy.example.internal"},
		"SubnetsAndGroupsNoSecret": {"SubnetIds": "subnet-0a", "SecurityGroupIds": "sg-0a", "DatabaseSecretArn": ""},
	} {
		t.Run(name, func(t *testing.T) {
			if r := newShape(t, tpl, params).refused(); len(r) == 0 {
				t.Errorf("%v: accepted, want refused by a rule", params)
			}
		})
	}
}

// TestDatabaseProxy: EnableDatabaseProxy puts an RDS Proxy in front of
// the stack's own database with its managed secret; the functions
// connect through it in exec mode, and the database admits the proxy
// alone.
func TestDatabaseProxy(t *testing.T) {
	tpl := loadTemplate(t)
	off := newShape(t, tpl, nil)
	if got := off.env("DATABASE_QUERY_MODE"); got != "Ref:DatabaseQueryMode" {
		t.Errorf("without the proxy: DATABASE_QUERY_MODE %s, want the parameter's", got)
	}
	if got := scalar(get(tpl.doc, "Parameters", "DatabaseQueryMode", "Default")); got != "cache_statement" {
		t.Errorf("DatabaseQueryMode: default %q, want cache_statement (pgx's own)", got)
	}
	if got := seq(get(tpl.doc, "Parameters", "DatabaseQueryMode", "AllowedValues")); !slices.Equal(got, []string{"cache_statement", "exec"}) {
		t.Errorf("DatabaseQueryMode: AllowedValues %v, want [cache_statement exec]", got)
	}
	if ids := off.ofType("AWS::RDS::DBProxy"); len(ids) > 0 {
		t.Errorf("proxies %v by default; the proxy is off unless asked for", ids)
	}

	s := newShape(t, tpl, map[string]string{"EnableDatabaseProxy": "true"})
	if r := s.refused(); len(r) > 0 {
		t.Fatalf("refused: %v", r)
	}
	s.checkRefs()
	created := s.resources()
	proxies := s.ofType("AWS::RDS::DBProxy")
	targets := s.ofType("AWS::RDS::DBProxyTargetGroup")
	dbs := s.ofType("AWS::RDS::DBCluster")
	if len(proxies) != 1 || len(targets) != 1 || len(dbs) != 1 {
		t.Fatalf("proxies %v, target groups %v, databases %v: want one each", proxies, targets, dbs)
	}
	proxy, db := proxies[0], dbs[0]
	p := get(created[proxy], "Properties")
	auth := get(p, "Auth").Content
	if scalar(get(p, "EngineFamily")) != "POSTGRESQL" || len(auth) != 1 ||
		canon(get(auth[0], "SecretArn")) != "GetAtt:"+db+".MasterUserSecret.SecretArn" || lit(get(p, "RequireTLS")) != "true" {
		t.Errorf("%s: want POSTGRESQL, TLS, and the database's managed secret", proxy)
	}
	tg := get(created[targets[0]], "Properties")
	if ref(get(tg, "DBProxyName")) != proxy || canon(get(tg, "DBClusterIdentifiers")) != "!!seq[Ref:"+db+"]" {
		t.Errorf("%s: want the database %s behind %s", targets[0], db, proxy)
	}
	for name, want := range map[string]string{
		"DB_HOST": "GetAtt:" + proxy + ".Endpoint", "DATABASE_QUERY_MODE": "!!strexec",
		"DB_SECRET_ARN": "GetAtt:" + db + ".MasterUserSecret.SecretArn",
	} {
		if got := s.env(name); got != want {
			t.Errorf("Globals %s: got %s, want %s", name, got, want)
		}
	}
	// Behind the proxy the functions read the master secret (the proxy's
	// client side takes it), and connect with no token.
	checkFunctionSecrets(t, s, "GetAtt:"+db+".MasterUserSecret.SecretArn", "Ref:AdminTokenSecret")
	checkBootstrap(t, s, db, "GetAtt:"+db+".MasterUserSecret.SecretArn", "Ref:AdminTokenSecret")
	if got := s.env("DB_IAM_USER"); got != "!!str" {
		t.Errorf("Globals DB_IAM_USER behind the proxy: got %s, want none", got)
	}
	proxySG := ref(get(p, "VpcSecurityGroupIds").Content[0])
	vc := s.resolve(get(tpl.doc, "Globals", "Function", "VpcConfig"))
	fnSG := ref(get(vc, "SecurityGroupIds").Content[0])
	checkSecurityGroups(t, s, fnSG, proxySG)
	// The database admits the proxy alone.
	in := get(created["DatabaseSecurityGroup"], "Properties", "SecurityGroupIngress").Content
	if len(in) != 1 || ref(get(in[0], "SourceSecurityGroupId")) != proxySG {
		t.Errorf("DatabaseSecurityGroup: ingress %s, want 5432 from %s only", canon(get(created["DatabaseSecurityGroup"], "Properties", "SecurityGroupIngress")), proxySG)
	}
}

// TestApiGatewayAccountRole: the account-wide API Gateway role is the
// stack's by default (a fresh account then logs), and "false" leaves the
// account's setting alone with nothing left naming it.
func TestApiGatewayAccountRole(t *testing.T) {
	tpl := loadTemplate(t)
	if got := scalar(get(tpl.doc, "Parameters", "CreateApiGatewayAccountRole", "Default")); got != "true" {
		t.Errorf("CreateApiGatewayAccountRole: default %q, want true (an empty account has no role set)", got)
	}
	for v, want := range map[string]int{"true": 1, "false": 0} {
		s := newShape(t, tpl, map[string]string{"CreateApiGatewayAccountRole": v})
		s.checkRefs()
		if got := len(s.ofType("AWS::ApiGateway::Account")); got != want {
			t.Errorf("CreateApiGatewayAccountRole=%s: %d AWS::ApiGateway::Account, want %d", v, got, want)
		}
	}
}

// checkSecurityGroups: the functions' group opens only HTTPS and Postgres
// (to the database's group, dbSG: the database or its proxy); dbSG
// admits Postgres from the functions only; every interface endpoint's
// group admits HTTPS only.
func checkSecurityGroups(t *testing.T, s *shape, fnSG, dbSG string) {
	t.Helper()
	created := s.resources()
	type rule struct{ proto, from, to, peer string }
	rulesOf := func(n *yaml.Node, peerKeys ...string) []rule {
		var out []rule
		for _, r := range n.Content {
			peer := ""
			for _, k := range peerKeys {
				if v := get(r, k); v != nil {
					peer = canon(v)
				}
			}
			out = append(out, rule{scalar(get(r, "IpProtocol")), scalar(get(r, "FromPort")), scalar(get(r, "ToPort")), peer})
		}
		return out
	}
	var egress []rule
	if n := get(created[fnSG], "Properties", "SecurityGroupEgress"); n != nil {
		egress = rulesOf(n, "CidrIp", "DestinationSecurityGroupId")
	} else {
		t.Errorf("%s: no SecurityGroupEgress: a group without one lets everything out", fnSG)
	}
	for _, r := range created {
		if scalar(get(r, "Type")) == "AWS::EC2::SecurityGroupEgress" && ref(get(r, "Properties", "GroupId")) == fnSG {
			egress = append(egress, rulesOf(&yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{get(r, "Properties")}}, "CidrIp", "DestinationSecurityGroupId")...)
		}
	}
	want := []rule{{"tcp", "443", "443", "!!str0.0.0.0/0"}, {"tcp", "5432", "5432", "Ref:" + dbSG}}
	slices.SortFunc(egress, func(a, b rule) int { return strings.Compare(a.from, b.from) })
	if !slices.Equal(egress, want) {
		t.Errorf("%s egress: got %v, want %v", fnSG, egress, want)
	}
	if got := rulesOf(get(created[dbSG], "Properties", "SecurityGroupIngress"), "CidrIp", "SourceSecurityGroupId"); !slices.Equal(got, []rule{{"tcp", "5432", "5432", "Ref:" + fnSG}}) {
		t.Errorf("%s ingress: got %v, want Postgres from %s only", dbSG, got, fnSG)
	}
	for id, r := range created {
		if scalar(get(r, "Type")) != "AWS::EC2::VPCEndpoint" || scalar(get(r, "Properties", "VpcEndpointType")) != "Interface" {
			continue
		}
		for _, g := range get(r, "Properties", "SecurityGroupIds").Content {
			for _, in := range rulesOf(get(created[ref(g)], "Properties", "SecurityGroupIngress"), "CidrIp", "SourceSecurityGroupId") {
				if in.proto != "tcp" || in.from != "443" || in.to != "443" || in.peer == "!!str0.0.0.0/0" {
					t.Errorf("%s's group %s: ingress %v, want HTTPS from the stack's groups only", id, ref(g), in)
				}
			}
		}
	}
}

// checkFunctionSecrets: every function this shape creates with the
// Globals' environment may read exactly the secrets it is given, and no
// other: the database's (DB_SECRET_ARN), the admin token's when given
// ADMIN_TOKEN_SECRET_ARN, a download links' key when given
// DOWNLOAD_LINK_KEY_SECRET_ARN (none is: the keys are the database's),
// each resolved in this shape. (The iotendpoint and pushrelay functions
// replace that environment by an intrinsic, and read no secret.) The proxy, when there is one, reads the database's
// alone.
func checkFunctionSecrets(t *testing.T, s *shape, dbSecret, tokenSecret string) {
	t.Helper()
	if got := strings.TrimPrefix(s.env("DB_SECRET_ARN"), "!!str"); got != dbSecret {
		t.Errorf("Globals DB_SECRET_ARN: got %s, want %s", got, dbSecret)
	}
	created := s.resources()
	for id := range s.tpl.functions {
		fn := created[id]
		if e := get(s.tpl.functions[id].node, "Properties", "Environment"); fn == nil || e != nil && e.Tag != "" && e.Tag != "!!map" {
			continue
		}
		want := map[string]bool{}
		if dbSecret != "" {
			want[dbSecret] = true
		}
		if v := get(fn, "Properties", "Environment", "Variables", "ADMIN_TOKEN_SECRET_ARN"); v != nil {
			if got := canon(v); got != tokenSecret {
				t.Errorf("%s: ADMIN_TOKEN_SECRET_ARN %s, want %s", id, got, tokenSecret)
			}
			want[tokenSecret] = true
		}
		if v := get(fn, "Properties", "Environment", "Variables", "DOWNLOAD_LINK_KEY_SECRET_ARN"); v != nil {
			want[canon(v)] = true
		}
		if got := secretsReadBy(get(fn, "Properties", "Policies"), created); !maps.Equal(got, want) {
			t.Errorf("%s may read the secrets %v, want exactly %v", id, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
	for _, id := range s.ofType("AWS::RDS::DBProxy") {
		if dbSecret == "" {
			t.Errorf("%s: a proxy, whose client side takes the database's secret, in a shape whose functions read none", id)
			continue
		}
		role := getAtt(get(created[id], "Properties", "RoleArn"))
		r := created[strings.TrimSuffix(role, ".Arn")]
		got := secretsReadBy(get(r, "Properties", "ManagedPolicyArns"), created)
		for i := 0; get(r, "Properties", "Policies") != nil && i < len(get(r, "Properties", "Policies").Content); i++ {
			maps.Copy(got, statementSecrets(get(get(r, "Properties", "Policies").Content[i], "PolicyDocument", "Statement")))
		}
		if !maps.Equal(got, map[string]bool{dbSecret: true}) {
			t.Errorf("%s's role %s may read the secrets %v, want %s alone", id, role, slices.Sorted(maps.Keys(got)), dbSecret)
		}
	}
}

// secretsReadBy returns the secrets (canon) that policies allow
// secretsmanager:GetSecretValue on: SAM's AWSSecretsManagerGetSecretValuePolicy
// entries, Statement entries, and the statements of the
// AWS::IAM::ManagedPolicy resources named by Ref (from resources).
func secretsReadBy(policies *yaml.Node, resources map[string]*yaml.Node) map[string]bool {
	out := map[string]bool{}
	for i := 0; policies != nil && i < len(policies.Content); i++ {
		pol := policies.Content[i]
		if v := get(pol, "AWSSecretsManagerGetSecretValuePolicy", "SecretArn"); v != nil {
			out[canon(v)] = true
		}
		maps.Copy(out, statementSecrets(get(pol, "Statement")))
		if r := resources[ref(pol)]; r != nil && scalar(get(r, "Type")) == "AWS::IAM::ManagedPolicy" {
			maps.Copy(out, statementSecrets(get(r, "Properties", "PolicyDocument", "Statement")))
		}
	}
	return out
}

// statementSecrets returns the resources (canon) of the Allow statements
// that grant secretsmanager:GetSecretValue.
func statementSecrets(statements *yaml.Node) map[string]bool {
	out := map[string]bool{}
	for i := 0; statements != nil && i < len(statements.Content); i++ {
		st := statements.Content[i]
		actions := append(seq(get(st, "Action")), scalar(get(st, "Action")))
		if scalar(get(st, "Effect")) != "Allow" || !slices.Contains(actions, "secretsmanager:GetSecretValue") {
			continue
		}
		if r := get(st, "Resource"); r != nil && r.Kind == yaml.SequenceNode && r.Tag == "!!seq" {
			for _, c := range r.Content {
				out[canon(c)] = true
			}
		} else {
			out[canon(r)] = true
		}
	}
	return out
}

// lit is a plain scalar's value, booleans included; "" for anything else.
func lit(n *yaml.Node) string {
	if n != nil && n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		return n.Value
	}
	return scalar(n)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// dbUserARN is the one database user the in-VPC functions may connect as
// with IAM database authentication, on cluster db.
func dbUserARN(db string) string {
	return "!Sub" + "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:${" + db + ".DBClusterResourceId}/pendinguploads_app"
}

// statementsOf returns the Allow statements of policies (a function's
// Policies, resolved): inline Statement entries and those of the
// AWS::IAM::ManagedPolicy resources named by Ref, as action -> resources
// (canon).
func statementsOf(policies *yaml.Node, resources map[string]*yaml.Node) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	add := func(statements *yaml.Node) {
		for i := 0; statements != nil && i < len(statements.Content); i++ {
			st := statements.Content[i]
			if scalar(get(st, "Effect")) != "Allow" {
				continue
			}
			var res []string
			if r := get(st, "Resource"); r != nil && r.Kind == yaml.SequenceNode && r.Tag == "!!seq" {
				for _, c := range r.Content {
					res = append(res, canon(c))
				}
			} else {
				res = append(res, canon(r))
			}
			for _, a := range append(seq(get(st, "Action")), scalar(get(st, "Action"))) {
				if a == "" {
					continue
				}
				if out[a] == nil {
					out[a] = map[string]bool{}
				}
				for _, r := range res {
					out[a][r] = true
				}
			}
		}
	}
	for i := 0; policies != nil && i < len(policies.Content); i++ {
		pol := policies.Content[i]
		add(get(pol, "Statement"))
		add(get(pol, "PolicyDocument", "Statement"))
		if r := resources[ref(pol)]; r != nil && scalar(get(r, "Type")) == "AWS::IAM::ManagedPolicy" {
			add(get(r, "Properties", "PolicyDocument", "Statement"))
		}
	}
	return out
}

// checkIAMDatabaseAuth: in a shape whose functions connect to the
// stack's own cluster db with IAM database authentication, every function
// in the VPC may rds-db:connect as pendinguploads_app on db and nothing
// else, and none may read the database's secret (masterSecret); the
// Bootstrap function, outside the VPC, may read masterSecret and the
// admin token's secret and call the Data API on db alone, and its
// custom resource, which the migrations wait for, hands ADMIN_TOKEN_SHA256
// to the functions.
func checkIAMDatabaseAuth(t *testing.T, s *shape, db, masterSecret, tokenSecret string) {
	t.Helper()
	created := s.resources()
	for id := range s.tpl.functions {
		fn := created[id]
		if fn == nil || id == "Bootstrap" {
			continue
		}
		p := get(fn, "Properties")
		st := statementsOf(get(p, "Policies"), created)
		if role := getAtt(get(p, "Role")); role != "" {
			st = statementsOf(get(created[strings.TrimSuffix(role, ".Arn")], "Properties", "Policies"), created)
		}
		if st["secretsmanager:GetSecretValue"][masterSecret] {
			t.Errorf("%s may read the database's secret %s; it connects with a token", id, masterSecret)
		}
		inVPC := ref(get(s.tpl.functions[id].node, "Properties", "VpcConfig")) != "AWS::NoValue"
		got := slices.Sorted(maps.Keys(st["rds-db:connect"]))
		want := []string{dbUserARN(db)}
		if !inVPC {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s may rds-db:connect on %v, want %v", id, got, want)
		}
	}
	checkBootstrap(t, s, db, masterSecret, tokenSecret)
}

// checkBootstrap: the Bootstrap function runs outside the VPC; its role
// may read the admin token's secret (tokenSecret) and, with the stack's
// own cluster db (empty: none), its master secret and call the Data API
// on it, and nothing else; its custom resource, which the migrations wait
// for, hands ADMIN_TOKEN_SHA256 to the functions.
func checkBootstrap(t *testing.T, s *shape, db, masterSecret, tokenSecret string) {
	t.Helper()
	created := s.resources()
	if got := s.env("ADMIN_TOKEN_SHA256"); got != "GetAtt:Bootstrapped.AdminTokenSha256" {
		t.Errorf("Globals ADMIN_TOKEN_SHA256: got %s, want Bootstrapped's answer", got)
	}
	if got := canon(get(created["Migrations"], "Properties", "Bootstrapped")); got != "Ref:Bootstrapped" {
		t.Errorf("Migrations: Bootstrapped %s, want Ref:Bootstrapped (the role exists before the migrations run as it)", got)
	}
	cr := get(created["Bootstrapped"], "Properties")
	wantProps := map[string]string{
		"ServiceToken": "GetAtt:Bootstrap.Arn", "ClusterArn": "!!str", "MasterSecretArn": "!!str",
		"IamUser": "!!strpendinguploads_app", "AdminTokenSecretArn": tokenSecret, "AdminTokenVersion": "Ref:AdminTokenVersion",
	}
	wantActions := map[string][]string{
		"secretsmanager:GetSecretValue": {tokenSecret},
		"logs:CreateLogStream":          {"GetAtt:BootstrapLogs.Arn"},
		"logs:PutLogEvents":             {"GetAtt:BootstrapLogs.Arn"},
	}
	if db != "" {
		wantProps["ClusterArn"], wantProps["MasterSecretArn"] = "GetAtt:"+db+".DBClusterArn", masterSecret
		wantActions["secretsmanager:GetSecretValue"] = slices.Sorted(slices.Values([]string{masterSecret, tokenSecret}))
		wantActions["rds-data:ExecuteStatement"] = []string{"GetAtt:" + db + ".DBClusterArn"}
	}
	for k, want := range wantProps {
		if got := canon(get(cr, k)); got != want {
			t.Errorf("Bootstrapped.%s: got %s, want %s", k, got, want)
		}
	}
	bp := get(created["Bootstrap"], "Properties")
	if ref(get(s.tpl.functions["Bootstrap"].node, "Properties", "VpcConfig")) != "AWS::NoValue" {
		t.Errorf("Bootstrap: in the VPC; it calls the Data API and Secrets Manager from outside it")
	}
	role := strings.TrimSuffix(getAtt(get(bp, "Role")), ".Arn")
	st := statementsOf(get(created[role], "Properties", "Policies"), created)
	if len(st) != len(wantActions) {
		t.Errorf("%s: actions %v, want %v", role, slices.Sorted(maps.Keys(st)), slices.Sorted(maps.Keys(wantActions)))
	}
	for a, want := range wantActions {
		if got := slices.Sorted(maps.Keys(st[a])); !slices.Equal(got, want) {
			t.Errorf("%s: %s on %v, want %v", role, a, got, want)
		}
	}
}
