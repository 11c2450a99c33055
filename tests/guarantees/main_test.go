package guarantees_test

import (
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }
