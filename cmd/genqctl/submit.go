package main

import (
	"context"
	"errors"
)

func runSubmit(ctx context.Context, args []string, e env) error {
	return errors.New("submit: not built yet")
}
