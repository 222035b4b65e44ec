package deploytest

// The price table of the idle cost (idle_test.go): us-east-1 list prices,
// on-demand, each from AWS's own pricing page as read on the day given
// (through the stored copies of those pages), in US dollars. A month is
// monthHours. CloudWatch's free tier (10 alarms, 10 metrics, 3
// dashboards) and X-Ray's are not counted: an account may have spent them
// on its own.

// monthHours is the month AWS's pricing pages use.
const monthHours = 730

// A price is one figure of the table: perHour for what bills by the hour
// it exists, perMonth for what bills by the month (or by the unit, a GB
// or a request: unit says which), and the page it was read on.
type price struct {
	perHour  float64 // US dollars an hour, for one unit
	perMonth float64 // US dollars a month, for one unit (or per unit when unit says so)
	unit     string  // what one is
	page     string  // AWS's pricing page
	read     string  // the day it was read
}

const read = "2026-12-06"

const (
	pageAurora      = "https://aws.amazon.com/rds/aurora/pricing/"
	pageRDSProxy    = "https://aws.amazon.com/rds/proxy/pricing/"
	pagePrivateLink = "https://aws.amazon.com/privatelink/pricing/"
	pageSecrets     = "https://aws.amazon.com/secrets-manager/pricing/"
	pageCloudWatch  = "https://aws.amazon.com/cloudwatch/pricing/"
	pageDynamoDB    = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
	pageRoute53     = "https://aws.amazon.com/route53/pricing/"
	pageLambda      = "https://aws.amazon.com/lambda/pricing/"
	pageXRay        = "https://aws.amazon.com/xray/pricing/"
)

// prices are the figures, by name.
var prices = map[string]price{
	// Aurora PostgreSQL, Aurora Standard (not I/O-Optimized): Serverless
	// v2's capacity by the ACU-hour (billed by the second while an
	// instance runs, nothing while it is paused), its storage by the
	// GB-month used (backups free up to it, within the retention), and its
	// I/O by the million requests.
	"aurora acu":     {perHour: 0.12, unit: "ACU-hour, Aurora Serverless v2", page: pageAurora, read: read},
	"aurora storage": {perMonth: 0.10, unit: "GB-month used, Aurora Standard", page: pageAurora, read: read},
	"aurora io":      {perMonth: 0.20 / 1e6, unit: "I/O request, Aurora Standard", page: pageAurora, read: read},
	// RDS Proxy in front of Aurora Serverless v2: per ACU of the instances
	// behind it, 8 ACUs at least (proxyMinACUs).
	"rds proxy": {perHour: 0.015, unit: "ACU-hour of the database behind it (8 at least)", page: pageRDSProxy, read: read},
	// An interface endpoint, in each zone it has a subnet in.
	"interface endpoint": {perHour: 0.01, unit: "endpoint in one zone", page: pagePrivateLink, read: read},
	// A secret (the RDS-managed one too); replicas are secrets as well.
	"secret": {perMonth: 0.40, unit: "secret", page: pageSecrets, read: read},
	// CloudWatch: a standard-resolution metric alarm (its period 60 s or
	// more; a p99 is standard), a high-resolution one, a dashboard, a
	// custom metric (EMF's included: each name and dimension set a
	// metric), and log ingestion.
	"alarm":            {perMonth: 0.10, unit: "standard-resolution alarm metric", page: pageCloudWatch, read: read},
	"alarm high-res":   {perMonth: 0.30, unit: "high-resolution alarm metric", page: pageCloudWatch, read: read},
	"dashboard":        {perMonth: 3.00, unit: "dashboard", page: pageCloudWatch, read: read},
	"custom metric":    {perMonth: 0.30, unit: "metric (the first 10,000)", page: pageCloudWatch, read: read},
	"log ingestion":    {perMonth: 0.50, unit: "GB ingested", page: pageCloudWatch, read: read},
	"lambda request":   {perMonth: 0.20 / 1e6, unit: "request", page: pageLambda, read: read},
	"lambda arm64 GBs": {perMonth: 0.0000133334, unit: "GB-second, arm64", page: pageLambda, read: read},
	"xray trace":       {perMonth: 5.00 / 1e6, unit: "trace recorded", page: pageXRay, read: read},
	// DynamoDB on demand: requests and storage, no hourly price; at rest
	// its storage alone (the Standard table class).
	"dynamodb storage": {perMonth: 0.25, unit: "GB-month stored", page: pageDynamoDB, read: read},
}

// What an idle Aurora Serverless v2 cluster bills beyond its price:
// documented figures, and assumptions (said so) where AWS gives none.
const (
	// auroraMinRunningACU: the least a running (not paused) instance
	// bills, an assumption: 0.5 is the smallest MinCapacity of a version
	// without auto-pause (the RDS API reference,
	// ServerlessV2ScalingConfiguration), the least Aurora Serverless v2
	// ran at before 0 ACU; the pages read do not say what a resumed
	// instance with a minimum of 0 runs at when idle.
	auroraMinRunningACU = 0.5
	// auroraIdleGB: an assumption, not a documented figure. Aurora bills
	// the cluster volume's bytes used (VolumeBytesUsed), which for an
	// empty cluster AWS does not state; 1 GB covers PostgreSQL's catalogs
	// and our empty schema with room. Measure it on a deploy
	// (docs/capacity.md, "What it costs while idle").
	auroraIdleGB = 1.0
	// auroraIOPerWake: an assumption: the storage reads (8 KiB pages) and
	// writes a resumed instance's first connection and one scheduled run
	// make with a cold cache, a few hundred; counted high.
	auroraIOPerWake = 1000.0
	// proxyMinACUs: RDS Proxy's minimum in front of Aurora Serverless v2
	// (its pricing page).
	proxyMinACUs = 8.0
)

// What a scheduled run costs beyond its request: assumptions, not prices.
const (
	sweepSeconds = 0.1 // billed duration of an idle sweep run, assumed
	// resumeSeconds: a run that wakes a paused Aurora Serverless v2 waits
	// for it (app.WaitForDatabase), billed: "up to 15 seconds", AWS's
	// launch post of scaling to 0 ACU (docs/operating.md).
	resumeSeconds = 15.0
	sweepLogBytes = 3000 // its log lines (START, the swept line, the metrics, END, REPORT), about
)

// freeAtRest are the resource types of the translated template that bill
// nothing while no client calls, each with the reason.
var freeAtRest = map[string]string{
	"AWS::ApiGateway::Account":                 "a setting of the account",
	"AWS::ApiGateway::Deployment":              "API Gateway bills per request",
	"AWS::ApiGateway::RestApi":                 "API Gateway bills per request",
	"AWS::ApiGateway::Stage":                   "per request; no cache cluster is set",
	"AWS::CloudFormation::WaitConditionHandle": "CloudFormation's own resources are free",
	"AWS::EC2::RouteTable":                     "the VPC's parts are free",
	"AWS::EC2::SecurityGroup":                  "the VPC's parts are free",
	"AWS::EC2::SecurityGroupEgress":            "the VPC's parts are free",
	"AWS::EC2::SecurityGroupIngress":           "the VPC's parts are free",
	"AWS::EC2::Subnet":                         "the VPC's parts are free",
	"AWS::EC2::SubnetRouteTableAssociation":    "the VPC's parts are free",
	"AWS::EC2::VPC":                            "the VPC's parts are free",
	"AWS::Events::Rule":                        "a schedule is free; what it runs is priced as the sweep's runs",
	"AWS::GuardDuty::MalwareProtectionPlan":    "GuardDuty bills per object scanned and per GB scanned: none at rest",
	"AWS::IAM::ManagedPolicy":                  "IAM is free",
	"AWS::IAM::Role":                           "IAM is free",
	"AWS::IoT::Authorizer":                     "IoT Core bills per connection-minute, message and authorization",
	"AWS::Lambda::Alias":                       "Lambda bills per request and duration",
	"AWS::Lambda::EventSourceMapping":          "Lambda's reads of a DynamoDB stream are not billed (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CostOptimization_StreamsUsage.html); an invocation bills when a hint comes",
	"AWS::Lambda::Function":                    "per request and duration (a scheduled one is priced by its schedule)",
	"AWS::Lambda::Permission":                  "Lambda bills per request and duration",
	"AWS::Lambda::Url":                         "Lambda bills per request and duration",
	"AWS::Lambda::Version":                     "Lambda bills per request and duration",
	"AWS::Logs::LogGroup":                      "per GB ingested and stored; the sweep's lines are priced with its runs",
	"AWS::RDS::DBProxyTargetGroup":             "part of the proxy, priced as AWS::RDS::DBProxy",
	"AWS::RDS::DBSubnetGroup":                  "free",
	"AWS::S3::Bucket":                          "per GB stored and per request: empty at rest",
	"AWS::S3::BucketPolicy":                    "free",
	"Custom::IotEndpoint":                      "a Lambda run at deploy",
	"Custom::Bootstrap":                        "a Lambda run at deploy",
	"Custom::Migrate":                          "a Lambda run at deploy",
}
