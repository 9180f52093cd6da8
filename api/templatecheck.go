package api

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vkllm/vkllm/internal/jinja"
)

// CheckChatTemplate reports, before any model is loaded, whether name (the
// --chat-template setting, "" for the default) is a chat template and
// whether src (the text of --chat-template-file, "" for none) is a Jinja
// template that parses. Whether the model has a template of its own for
// "jinja" is known only once it is loaded (Server.Ready).
func CheckChatTemplate(name, src string) error {
	if src != "" {
		if name != "" && name != "jinja" {
			return fmt.Errorf("--chat-template %q with --chat-template-file: the file is a Jinja template; leave --chat-template out or set it to jinja", name)
		}
		if _, err := jinja.Parse(src); err != nil {
			return fmt.Errorf("--chat-template-file: the template does not parse: %v", err)
		}
		if _, err := newChatTemplate("jinja", src); err != nil {
			return fmt.Errorf("--chat-template-file: %v", err)
		}
		return nil
	}
	if name != "" && !slices.Contains(TemplateNames, name) {
		return fmt.Errorf("--chat-template: unknown template %q, want one of %s", name, strings.Join(TemplateNames, ", "))
	}
	return nil
}
