package main

import (
	"context"
	"errors"
)

// runDownload is implemented by the model download work (issue 5).
func runDownload(ctx context.Context, args []string, e env) error {
	return errors.New("download: not built yet")
}
