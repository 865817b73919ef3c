package lograil.spring;

/** A failure that a later attempt may not meet. */
public class TransientException extends RuntimeException {
    public TransientException(String message) {
        super(message);
    }
}
