package config

import (
	"fmt"
	"strings"
)

// Markdown is the table of settings docs/configuration.md carries: each
// setting's file key, flag, variable, default and what it does.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| file key | flag | variable | default | what it does |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, e := range Table {
		flag := code("--" + e.Flag)
		switch {
		case e.Flag == "":
			flag = ""
		case e.Cmds == Serve:
			flag += " (serve)"
		case e.Cmds == EPP:
			flag += " (epp)"
		}
		doc := e.Doc
		if e.Reload {
			doc += "; applies on reload"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", code(e.Key), flag, code(e.Env), code(e.Default), strings.ReplaceAll(doc, "|", `\|`))
	}
	return b.String()
}

// code writes s as Markdown code, or nothing when s is empty.
func code(s string) string {
	if s == "" || s == "--" {
		return ""
	}
	return "`" + s + "`"
}
