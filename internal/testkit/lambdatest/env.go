package lambdatest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Defaults of the environment Start gives a function. Callers override any
// of them through Start's env.
const (
	DefaultRegion     = "us-east-1"
	DefaultMemoryMB   = "128"
	DefaultAccountID  = "123456789012"
	defaultVersion    = "$LATEST"
	defaultLambdaPath = "/usr/local/bin:/usr/bin/:/bin:/opt/bin"
)

// lambdaEnv returns the environment of a function process: what Lambda
// sets for a provided.al2023 function (with LoggingConfig LogFormat JSON),
// then extra in order. An extra entry "NAME=value" sets NAME, a bare "NAME"
// removes it. Nothing comes from the test's own environment.
func lambdaEnv(name, taskRoot, api string, extra []string) []string {
	stream := time.Now().UTC().Format("2006/01/02") + "/[" + defaultVersion + "]" + randomHex(16)
	base := []string{
		"PATH=" + defaultLambdaPath,
		"LANG=en_US.UTF-8",
		"TZ=:UTC",
		"LAMBDA_TASK_ROOT=" + taskRoot,
		"LAMBDA_RUNTIME_DIR=" + taskRoot,
		"_HANDLER=bootstrap",
		"AWS_LAMBDA_RUNTIME_API=" + api,
		"AWS_LAMBDA_FUNCTION_NAME=" + name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + DefaultMemoryMB,
		"AWS_LAMBDA_FUNCTION_VERSION=" + defaultVersion,
		"AWS_LAMBDA_INITIALIZATION_TYPE=on-demand",
		"AWS_LAMBDA_LOG_FORMAT=JSON",
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + name,
		"AWS_LAMBDA_LOG_STREAM_NAME=" + stream,
		"AWS_REGION=" + DefaultRegion,
		"AWS_DEFAULT_REGION=" + DefaultRegion,
	}
	var keys []string
	vals := make(map[string]string)
	set := func(kv string) {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			return
		}
		if !ok {
			delete(vals, k)
			return
		}
		if _, seen := vals[k]; !seen {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	for _, kv := range base {
		set(kv)
	}
	for _, kv := range extra {
		set(kv)
	}
	env := make([]string, 0, len(vals))
	for _, k := range keys {
		if v, ok := vals[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// lookupEnv returns the value of key in env, last entry winning.
func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// newRequestID returns a random version 4 UUID, as Lambda's request IDs are.
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newTraceID returns an X-Ray trace header as Lambda passes it.
func newTraceID() string {
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", time.Now().Unix(), randomHex(12), randomHex(8))
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
