# src/rs_vocabulary.h, which setup.py generates from rocketstore/common/: message property names
# (string literals with their lengths), the properties' separators and the system topics the
# native code compares. Macros known at compile time: a memcmp against one compiles to a word
# compare, as against a literal.
cdef extern from "rs_vocabulary.h":
    const char* PROPERTY_TAGS "RS_PROPERTY_TAGS"
    const char* PROPERTY_KEYS "RS_PROPERTY_KEYS"
    const char* PROPERTY_UNIQ_KEY "RS_PROPERTY_UNIQ_KEY"
    const char* PROPERTY_DELAY "RS_PROPERTY_DELAY"
    const char* SCHEDULE_TOPIC "RS_SCHEDULE_TOPIC"
    enum:
        PROPERTY_TAGS_LEN "RS_PROPERTY_TAGS_LEN"
        PROPERTY_KEYS_LEN "RS_PROPERTY_KEYS_LEN"
        PROPERTY_UNIQ_KEY_LEN "RS_PROPERTY_UNIQ_KEY_LEN"
        PROPERTY_DELAY_LEN "RS_PROPERTY_DELAY_LEN"
        NAME_VALUE_SEPARATOR "RS_NAME_VALUE_SEPARATOR"
        SCHEDULE_TOPIC_LEN "RS_SCHEDULE_TOPIC_LEN"
