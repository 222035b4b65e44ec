package push_test

import (
	"testing"

	"github.com/pendinguploads/pendinguploads/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
